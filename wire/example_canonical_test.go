package wire_test

import (
	"errors"
	"fmt"

	"github.com/gocotal/cotal/wire"
)

func ExampleCanonicalize() {
	out, err := wire.Canonicalize([]byte(`{"b": [1.50, 2e3, -0, 1e21], "a": "caf\u00e9 \/"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))

	_, err = wire.Canonicalize([]byte(`{"a": 1, "\u0061": 2}`))
	fmt.Println(errors.Is(err, wire.ErrNotCanonicalizable), err)
	// Output:
	// {"a":"café /","b":[1.5,2000,0,1e+21]}
	// true canonical json: at offset 9: duplicate key "a"
}
