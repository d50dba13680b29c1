package lang

// The names a program may reference without declaring, and the host globals it may not reach
// (spec §3).

// Effects are the effect primitives (§6.1), each with its option bag's position (1-based) and
// keys, and whether its step name is required.
var effects = map[string]effectShape{
	"spawn":      {bag: 2, keys: []string{"name", "placement", "worktree", "join", "role", "permits", "supervise", "onFork", "events"}},
	"turn":       {bag: 2, keys: []string{"name", "deadline"}, named: true},
	"ask":        {bag: 2, keys: []string{"name", "schema", "deadline", "attempts"}, named: true},
	"checkpoint": {bag: 3, keys: []string{"schema", "timeout", "onExpiry", "to"}, named: true, positional: true},
	"sleep":      {bag: 2, keys: []string{"name"}},
	"wait":       {bag: 2, keys: []string{"name", "timeout"}},
	"waitUntil":  {bag: 2, keys: []string{"name", "every", "deadline", "terminal"}, named: true},
	"notify":     {bag: 3, keys: []string{"name"}},
	"monitor":    {bag: 2, keys: []string{"name"}},
	"parallel":   {bag: 2, keys: []string{"name"}, scope: true},
	"race":       {bag: 2, keys: []string{"name"}, scope: true},
	"fanOut":     {bag: 3, keys: []string{"name", "key"}, named: true, scope: true},
	"conclave":   {bag: 3, keys: []string{"name", "channel"}, named: true, scope: true},
}

// effectShape is an effect primitive's call shape.
type effectShape struct {
	bag   int
	keys  []string
	named bool // the step name is required (L3012) and must be a literal (L3013)
	// positional: the name is the first argument rather than an option (checkpoint).
	positional bool
	scope      bool
}

// signatures are the primitives' signatures, as a refusal names them.
var signatures = map[string]string{
	"spawn":      "spawn(persona, { name?, placement?, worktree?, join?, role?, permits?, supervise?, onFork?, events? })",
	"turn":       "turn(agent, { name, deadline? })",
	"ask":        "ask(agent, { name, schema, deadline?, attempts? })",
	"checkpoint": "checkpoint(name, prompt, { schema?, timeout?, onExpiry?, to? })",
	"sleep":      "sleep(duration, { name? })",
	"wait":       "wait(event, { name?, timeout? })",
	"waitUntil":  "waitUntil(probe, { name, every, deadline, terminal? })",
	"notify":     "notify(agents, fact, { name? })",
	"monitor":    "monitor(agent, { name? })",
	"parallel":   "parallel(branches, { name? })",
	"race":       "race(branches, { name? })",
	"fanOut":     "fanOut(items, fn, { name, key? })",
	"conclave":   "conclave(members, fn, { name, channel? })",
}

// pureNames are the reserved names that are not effects: the event constructors, the pure
// primitives, the builtins and undefined (§3, §5.1, §6.6, §6.7).
var pureNames = []string{
	"replied", "message", "idle", "down", "channel", "run",
	"keys", "values", "entries", "has", "merge",
	"len", "map", "filter", "find", "some", "every", "sort", "slice", "concat", "join", "reverse", "unique", "range", "sum",
	"split", "trim", "lower", "upper", "startsWith", "endsWith", "contains", "replace",
	"min", "max", "abs", "floor", "ceil", "round", "parseNumber",
	"json", "assert", "log", "random", "randomInt", "pick", "now", "duration",
	"undefined",
}

// isReserved reports whether name is a reserved name.
func isReserved(name string) bool {
	_, ok := effects[name]
	return ok || reservedPure[name]
}

var reservedPure = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range pureNames {
		m[n] = true
	}
	return m
}()

// hostGlobals are the host globals refused by name (L2012), with the language's replacement
// where there is one.
var hostGlobals = map[string]string{
	"Math": "abs, floor, ceil, round, min, max, random, randomInt", "JSON": "json.parse and json.stringify",
	"Object": "keys, values, entries, has and merge", "Array": "an array literal, range and the array builtins",
	"Number": "parseNumber", "String": "a template literal", "Boolean": "!!value",
	"parseInt": "parseNumber", "parseFloat": "parseNumber", "isNaN": "value !== value", "isFinite": "a comparison",
	"Infinity": "a large number", "NaN": "a comparison", "Date": "now()", "Map": "a record", "Set": "unique",
	"Error": "throw a record: throw { code, message }", "console": "log", "setTimeout": "sleep", "setInterval": "a loop with sleep",
	"globalThis": "", "global": "", "window": "", "self": "", "process": "", "fetch": "", "RegExp": "", "Reflect": "",
	"Proxy": "", "Symbol": "", "WeakMap": "", "WeakSet": "", "WeakRef": "", "Function": "", "setImmediate": "",
	"queueMicrotask": "", "require": "", "module": "", "exports": "", "__dirname": "", "__filename": "", "Buffer": "",
	"crypto": "", "performance": "", "structuredClone": "", "eval": "", "arguments": "", "BigInt": "", "Intl": "",
	"Atomics": "", "SharedArrayBuffer": "", "ArrayBuffer": "", "DataView": "", "TextEncoder": "", "TextDecoder": "",
	"URL": "", "URLSearchParams": "", "AbortController": "", "encodeURIComponent": "", "decodeURIComponent": "",
	"encodeURI": "", "decodeURI": "", "escape": "", "unescape": "",
	"Int8Array": "", "Uint8Array": "", "Uint8ClampedArray": "", "Int16Array": "", "Uint16Array": "", "Int32Array": "",
	"Uint32Array": "", "Float32Array": "", "Float64Array": "", "BigInt64Array": "", "BigUint64Array": "", "Float16Array": "",
}
