// Package doccheck holds the tests that keep README.md and docs/ true to the tree: every relative
// link resolves, no page tells the story of the work by issue number, and the README stays a
// front door.
package doccheck
