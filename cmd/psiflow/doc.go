// Command psiflow is the launcher for psiflow data-loading pipelines.
//
// Each subcommand lives in its own file and registers itself in an init
// function with [register]; main dispatches on the first argument.
package main
