#!/bin/sh
# Make the perf.data files of this directory and what perf itself says of them (the golden
# references of tests/perf/test_perf_golden.py).  Run it here, as a user who may record events
# (perf_event_paranoid, or root), with perf and gcc installed.
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -pthread -o "$tmp/perfprog" perfprog.c
opts="-e cpu-clock -c 100000 --call-graph dwarf,256 --sample-cpu --period"

# threads.data: file mode.  pipe.data: pipe mode (perf record -o -), one thread's worth.
perf record -q $opts -o threads.data -- "$tmp/perfprog" 1.5 >/dev/null
perf record -q $opts -o - -- "$tmp/perfprog" 1 >pipe.data
# compressed.data: perf record -z (COMPRESSED records, zstd).
perf record -q -z -e cpu-clock -c 1000000 -o compressed.data -- "$tmp/perfprog" 0.5 >/dev/null

for name in threads pipe; do
	perf script -D -i $name.data | grep -v '^\.  *[0-9a-f]\{4\}: ' | gzip -9n >$name.dump.txt.gz
	perf script -F pid,tid,time,ip,period,cpu --ns -G -i $name.data >$name.script.txt
	perf report --header-only -I -i $name.data >$name.header.txt
done
perf buildid-list -i threads.data >threads.buildids.txt
rm -f ./*.old
