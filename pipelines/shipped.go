package pipelines

import (
	"embed"
	"io/fs"
)

//go:embed *.yaml
var shipped embed.FS

// Shipped holds the pipeline files shipped in the repository (imagefolder.yaml,
// webdataset.yaml, tables.yaml, demo.yaml); "psiflow run demo" finds them by name.
func Shipped() fs.FS { return shipped }
