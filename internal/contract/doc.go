// Package contract holds endpoint contracts (SPEC §13.7 "Contracts and discovery"): command
// schemas compiled as JSON Schema 2020-12 under the contract profile, content addressing by
// artifact and closure digests, cluster documents built from command declarations, and the
// space's contract stream EPC_<space>, where artifacts are published create-only and fetched by
// digest.
package contract
