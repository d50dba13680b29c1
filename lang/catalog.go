package lang

// titles are the catalog's titles (the spec's Appendix A) of the codes this package raises: a
// diagnostic's message starts with its code's title, so a search of the catalog finds it.
var titles = map[string]string{
	"L1001": "Forbidden syntax: `class`",
	"L1002": "Forbidden syntax: `this`",
	"L1003": "Forbidden syntax: `var`",
	"L1004": "Forbidden syntax: `for...in`",
	"L1005": "Forbidden syntax: generator",
	"L1007": "Forbidden syntax: regular expression literal",
	"L1008": "Newline hazard",
	"L1009": "Unbraced branch",
	"L1010": "`switch` case does not terminate",
	"L1011": "Computed property name",
	"L1012": "Array elision",
	"L1013": "Forbidden syntax: `with`",
	"L1015": "Forbidden syntax: accessor",
	"L1016": "Forbidden syntax: `instanceof`",
	"L1017": "Forbidden syntax: label",
	"L1018": "Forbidden syntax: tagged template literal",
	"L1019": "Forbidden syntax: `new`",
	"L1020": "Forbidden syntax: `import` or `export`",
	"L1021": "Forbidden syntax: `delete`",
	"L1022": "Forbidden syntax: `do...while`",
	"L1023": "Forbidden syntax: `await` outside an async function",
	"L1024": "`return` outside a function",
	"L1025": "Forbidden syntax: loose equality",
	"L1026": "Forbidden syntax: comma operator",
	"L1027": "Forbidden syntax: `void`",
	"L1028": "Forbidden property name",
	"L1029": "Syntax outside the language",
	"L1030": "Forbidden literal: bigint",
	"L2001": "Unknown identifier",
	"L2002": "Shadows a builtin or a primitive",
	"L2003": "Assignment to a `const` binding",
	"L2004": "Use before declaration",
	"L2011": "The Promise API is not available",
	"L2012": "Host global is not available",
	"L2013": "An async call is not awaited",
	"L2031": "Mutation of a frozen value",
	"L2032": "Write from a concurrent branch to something declared outside it",
	"L3011": "Unknown option key",
	"L3012": "Missing required step name",
	"L3013": "Step name is not a literal",
	"L3014": "Malformed step name",
	"L3021": "`fanOut` has no stable key",
	"L3023": "Array-form `parallel` holds named effects",
	"L3024": "`fanOut` branch keys are not unique",
	"L3025": "Branch key contains a reserved step-key character",
	"L3041": "Value cannot cross an effect boundary",
	"L3042": "Function passed as effect data",
	"L3043": "`notify` fact is not a bounded decision record",
	"L3044": "`to` without `onExpiry: \"escalate\"`",
	"L3045": "`waitUntil` probe is not a function",
	"L3046": "`waitUntil` needs a cadence and a deadline",
	"L3047": "`waitUntil` cadence is zero, or does not divide its deadline usefully",
	"L3048": "`spawn` placement is not an endpoint and instanceId pair",
}

// titled prefixes a diagnostic's detail with its code's title.
func titled(code, detail string) string {
	if t, ok := titles[code]; ok {
		return t + ": " + detail
	}
	return detail
}
