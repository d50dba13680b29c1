package wire

// An interactive session's frames (SPEC §13.6, attach). Each message on a session's rails is a
// rail frame: {"t":"f","seq":S,"data":D,"ack":A} carries one terminal frame D, numbered from 1
// per rail, with the sender's count of frames taken on the other rail (A, when above 0);
// {"t":"credit","ack":A} advertises that count alone, and {"t":"close"} is the advisory close. A
// sender may have at most the grant's window (64 by default) unacknowledged; the receiver credits
// every ceil(window/2), again each second while quiet, and a window full for 30 s breaks the
// rail. The terminal frames are {"k":"data","b":<standard base64>}, {"k":"ready"},
// {"k":"resize","cols":C,"rows":R}, {"k":"end","reason":R} and {"k":"drop","bytes":N}: the
// caller sends data, ready and resize on the in rail; the serving end sends data, end and drop
// on the out rail.
