package mesh

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/gocotal/cotal/internal/hooksock"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// TestTellTurnReachesTheSeatsSocket: the manager tells a seat of its turn on the seat's own hook
// socket, as a turn event carrying the pending turn; a seat with no socket is an error the
// manager only logs.
func TestTellTurnReachesTheSeatsSocket(t *testing.T) {
	sp := wire.Space("tellturn")
	p, err := wire.NewPrincipal(string(wire.DevOwner), fmt.Sprintf("seat_%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	tell := tellSeat(sp)
	turn := manager.PendingTurn{GoalID: "g-1", Payload: `{"run":"run-1","step":"/turn:go#0"}`, AcceptedAt: 1, DeadlineAt: 2}
	payload, err := json.Marshal(turn)
	if err != nil {
		t.Fatal(err)
	}
	if err := tell(t.Context(), p, manager.HookTurn, payload); err == nil {
		t.Error("a seat with no socket was told")
	}
	path, err := hooksock.Socket(sp, p)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); os.Remove(path) })
	got := make(chan hooksock.Request, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		var req hooksock.Request
		line, _ := bufio.NewReader(conn).ReadBytes('\n')
		_ = json.Unmarshal(line, &req)
		got <- req
		_, _ = conn.Write([]byte("{}\n"))
	}()
	if err := tell(t.Context(), p, manager.HookTurn, payload); err != nil {
		t.Fatal(err)
	}
	req := <-got
	var told manager.PendingTurn
	if req.Event != manager.HookTurn || json.Unmarshal(req.Payload, &told) != nil || told != turn {
		t.Errorf("the seat was told %s %s", req.Event, req.Payload)
	}
}
