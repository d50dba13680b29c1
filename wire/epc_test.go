package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestContractStreamAndSubject(t *testing.T) {
	s := Space("main")
	if got := s.KindAll(KindEpc); got != "cotal.main.epc.>" {
		t.Errorf("KindAll(KindEpc) = %q", got)
	}
	hex := strings.Repeat("0123456789abcdef", 4)
	got, err := s.ContractSubject(hex)
	if err != nil || got != "cotal.main.epc."+hex {
		t.Errorf("ContractSubject = %q, %v", got, err)
	}
	for _, bad := range []string{
		"", "*", ">", hex[:63], hex + "0", strings.ToUpper(hex), "sha256:" + hex, hex[:62] + ".x",
	} {
		if _, err := s.ContractSubject(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ContractSubject(%q): %v, want a validation error", bad, err)
		}
	}
}
