// Package pkgtest holds the Go tests of the Python package python/psiflow as a
// user meets it: installed as README.md says in a fresh virtual environment, the
// README's and docs/PYTORCH.md's code run verbatim against it, and two ranks under
// torch.distributed.run, one killed and resumed. It has no code of its own: the
// tests run in `go test ./...` (make test) beside the other packages, so the
// minutes they spend in pip, torch and Python overlap with the rest of the suite.
// Python, numpy and torch come from Debian (make test installs them); without
// them the tests skip, unless PSIFLOW_REQUIRE_PYTHON=1, where they fail.
package pkgtest
