// Package docscheck has no code of its own: its test checks that every relative
// link in README.md and docs/*.md names a file that exists and, where it carries
// an #anchor into a Markdown file, a heading of that file that produces the anchor
// by GitHub's rules.
package docscheck
