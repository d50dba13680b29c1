package mesh

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gocotal/cotal/internal/authority"
)

// moveToStoreAccount moves the JetStream data a space's account holds to its store account, on
// a broker's store from before the space's streams lived in a store account: the server keeps
// each account's streams under a directory named by the account's key. It runs before the
// broker starts, and does nothing once the account holds none. A cluster node's streams are
// also named in the cluster's replicated metadata, which a rename cannot change: there it
// refuses, and leaves the store as it is.
func moveToStoreAccount(storeDir string, sk *authority.SpaceKeys, clustered bool) error {
	root := filepath.Join(storeDir, "jetstream")
	from, to := filepath.Join(root, sk.AccountPublicKey()), filepath.Join(root, sk.StorePublicKey())
	if _, err := os.Stat(from); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if clustered {
		return fmt.Errorf("the streams of space %s are in %s, under the space's account, as releases before the store account kept them; a cluster's streams cannot be moved in place: start a new cluster for this release, or run the previous one", sk.Space, from)
	}
	if _, err := os.Stat(to); err == nil {
		return fmt.Errorf("space %s has streams both under its account (%s) and under its store account (%s): move one aside", sk.Space, from, to)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(from, to)
}
