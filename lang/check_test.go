package lang

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckTestdata: each program in testdata/check says on its first line what the validator
// answers: "// refused: Lnnnn" (that code among the refusals), "// warns: Lnnnn" (accepted, with
// that warning) or "// accepted" (no refusal).
func TestCheckTestdata(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "check", "*.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		src := string(raw)
		first, _, _ := strings.Cut(src, "\n")
		r := Check(src)
		warning, warns := strings.CutPrefix(first, "// warns: ")
		switch code, refused := strings.CutPrefix(first, "// refused: "); {
		case refused && (r.Accepted || !hasCode(r.Diagnostics, code)):
			t.Errorf("%s: %v, want %s", file, r.Diagnostics, code)
		case warns && (!r.Accepted || !hasCode(r.Warnings, warning)):
			t.Errorf("%s: %v %v, want the warning %s", file, r.Diagnostics, r.Warnings, warning)
		case warns:
		case !refused && first != "// accepted":
			t.Errorf("%s: the first line says neither refused nor accepted", file)
		case !refused && !r.Accepted:
			t.Errorf("%s: refused %v", file, r.Diagnostics)
		}
	}
}

func hasCode(ds []Diagnostic, code string) bool {
	for _, d := range ds {
		if d.Code == code {
			return true
		}
	}
	return false
}

// TestCheckCollectsEveryError: one check reports every refusal, in source order, at its place.
func TestCheckCollectsEveryError(t *testing.T) {
	r := Check("var a = 1\nconst b = a == 2\nlog(c)\n")
	var got []string
	for _, d := range r.Diagnostics {
		got = append(got, d.String()[:strings.Index(d.String(), " ")+6])
	}
	if strings.Join(got, " | ") != "1:1: L1003 | 2:13: L1025 | 3:5: L2001" {
		t.Errorf("diagnostics %q", got)
	}
}

// TestCheckWarnings: array-form branches and a fanOut over items with no key warn, and do not
// refuse.
func TestCheckWarnings(t *testing.T) {
	r := Check("await parallel([() => sleep(\"1s\"), () => sleep(\"2s\")])\nawait fanOut([1, 2], async (n) => n, { name: \"each\" })\n")
	if !r.Accepted || !hasCode(r.Warnings, "L3023") || !hasCode(r.Warnings, "L3021") {
		t.Errorf("%+v", r)
	}
}

// FuzzCheck: no source makes the parser or the validator panic.
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "check", "*.js"))
	for _, file := range files {
		raw, _ := os.ReadFile(file)
		f.Add(string(raw))
	}
	f.Add("`${`${a}`}`")
	f.Add("({a = 1} = b)")
	f.Fuzz(func(t *testing.T, src string) {
		r := Check(src)
		if r.Accepted != (len(r.Diagnostics) == 0) {
			t.Fatalf("accepted %v with %d diagnostics", r.Accepted, len(r.Diagnostics))
		}
	})
}

// BenchmarkCheck2000Lines validates a program of 2,000 lines (the bound: 200 ms).
func BenchmarkCheck2000Lines(b *testing.B) {
	var src strings.Builder
	src.WriteString("const lead = await spawn(\"lead\")\nlet total = 0\n")
	for i := 0; src.Len() == 0 || strings.Count(src.String(), "\n") < 2000; i++ {
		fmt.Fprintf(&src, "async function step%d(n) {\n  const r = await turn(lead, { name: \"step-%d\", deadline: \"10m\" })\n"+
			"  if (r.status === \"blocked\") {\n    return n + 1\n  }\n  return [n, %d].map((x) => x * 2).length\n}\ntotal += await step%d(total)\n", i, i, i, i)
	}
	program := src.String()
	if r := Check(program); !r.Accepted {
		b.Fatal(r.Diagnostics[0])
	}
	b.SetBytes(int64(len(program)))
	for b.Loop() {
		Check(program)
	}
}

// BenchmarkCheckOneLongLine validates a 200 KB program on one line, as a minifier writes it: the
// parser stays linear in it (columns, and the lookahead for an arrow's parameters).
func BenchmarkCheckOneLongLine(b *testing.B) {
	program := strings.Repeat("log(((a) => (b) => [a, (b), ((1 + 2))])(1)(2)); ", 4000)
	b.SetBytes(int64(len(program)))
	for b.Loop() {
		if r := Check(program); !r.Accepted {
			b.Fatal(r.Diagnostics[0])
		}
	}
}
