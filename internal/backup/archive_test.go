package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocotal/cotal/wire"
)

// archiveOf writes a backup of the given entries, in order, and returns its path.
func archiveOf(t *testing.T, entries ...[2]string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e[0], Mode: 0o600, Size: int64(len(e[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.tgz")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fileOf(body string) File {
	sum := sha256.Sum256([]byte(body))
	return File{Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}
}

func manifestOf(t *testing.T, m Manifest) string {
	t.Helper()
	m.Format = Format
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestOpenChecksEveryFile: a backup opens only when its manifest comes first and lists exactly the
// files it holds, each of its size and digest.
func TestOpenChecksEveryFile(t *testing.T) {
	snap := "snapshot bytes"
	good := Manifest{Spaces: []wire.Space{"main"}, Streams: []Stream{{Space: "main", Name: "CHAT_main", Config: json.RawMessage(`{}`), State: json.RawMessage(`{}`)}},
		Files: map[string]File{"streams/CHAT_main.snap": fileOf(snap)}}
	if _, err := Open(archiveOf(t, [2]string{manifestName, manifestOf(t, good)}, [2]string{"streams/CHAT_main.snap", snap})); err != nil {
		t.Fatalf("a whole backup: %v", err)
	}
	extra := good
	extra.Files = map[string]File{"streams/CHAT_main.snap": fileOf(snap), "streams/DM_main.snap": fileOf("x")}
	for name, tc := range map[string]struct {
		path string
		want string
	}{
		"a snapshot that differs":       {archiveOf(t, [2]string{manifestName, manifestOf(t, good)}, [2]string{"streams/CHAT_main.snap", "snapshot bytez"}), "does not match"},
		"a file the manifest lacks":     {archiveOf(t, [2]string{manifestName, manifestOf(t, good)}, [2]string{"streams/CHAT_main.snap", snap}, [2]string{"keys", "k"}), "does not list"},
		"a file missing":                {archiveOf(t, [2]string{manifestName, manifestOf(t, good)}), "missing"},
		"no manifest first":             {archiveOf(t, [2]string{"streams/CHAT_main.snap", snap}), "not the manifest"},
		"a manifest that disagrees":     {archiveOf(t, [2]string{manifestName, manifestOf(t, extra)}, [2]string{"streams/CHAT_main.snap", snap}), "no stream or keys"},
		"another format":                {archiveOf(t, [2]string{manifestName, `{"format":"cotal-space-backup/v1"}`}), "format"},
		"a stream of an unlisted space": {archiveOf(t, [2]string{manifestName, manifestOf(t, Manifest{Streams: good.Streams, Files: good.Files})}, [2]string{"streams/CHAT_main.snap", snap}), "does not list"},
		"not an archive":                {writeFile(t, "plain text"), "not a gzipped archive"},
	} {
		if _, err := Open(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", name, err, tc.want)
		}
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKeysSealedAndUnpacked: sealed keys open with their passphrase alone, and an entry that is
// not a plain file name is never written.
func TestKeysSealedAndUnpacked(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "operator.nk"), []byte("SOSEED"), 0o600); err != nil {
		t.Fatal(err)
	}
	sealed, k, err := packKeys(src, []byte("pass"))
	if err != nil || !k.Encrypted || bytes.Contains(sealed, []byte("SOSEED")) {
		t.Fatalf("sealed keys: %v, %+v", err, k)
	}
	if _, err := k.open(sealed, []byte("wrong")); !errors.Is(err, ErrPassphrase) {
		t.Errorf("the wrong passphrase: %v", err)
	}
	tarred, err := k.open(sealed, []byte("pass"))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "auth")
	if err := unpackKeys(tarred, dst); err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(filepath.Join(dst, "operator.nk")); err != nil || string(raw) != "SOSEED" {
		t.Errorf("unpacked: %q, %v", raw, err)
	}
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	_ = tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o600, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	if err := unpackKeys(evil.Bytes(), filepath.Join(t.TempDir(), "auth")); err == nil {
		t.Error("a key entry with a path was written")
	}
}
