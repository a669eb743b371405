// Package layers holds the import-boundary test of the psiflow module: it declares
// the layers of the architecture, lowest first, and fails when a package imports
// one of a higher layer or a sibling component of its own layer, when a package is
// in no layer, when a package main lives outside cmd/, when a library package has
// an init function, or when a package has no doc comment. docs/AUTHORING.md ("Layout") describes the layers.
//
// It has no code of its own; the table is in layers_test.go.
package layers
