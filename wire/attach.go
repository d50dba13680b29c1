package wire

// An interactive session's frames (SPEC §13.6, attach): JSON objects on the session's rails,
// {"k":"data","b":<standard base64>}, {"k":"ready"}, {"k":"resize","cols":C,"rows":R},
// {"k":"end","reason":R} and {"k":"drop","bytes":N}. The caller sends data, ready, resize and
// end on the in rail; the serving end sends data, end and drop on the out rail.
