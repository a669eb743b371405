#!/bin/sh
# Reader benchmark: psiflow io_uring and pread readers against fio on the same files.
# Usage: cmd/source-bench/run.sh [-dir /var/tmp] [-rounds 5] [-quick]   (run as root, from the repository root)
# Writes ≤ 1.5 GiB under -dir and removes it. Needs fio (apt-get install fio) for the fio columns.
set -eu
cd "$(dirname "$0")/../.."
exec go run ./cmd/source-bench "$@"
