#!/bin/sh
# 100,000 chained instances and an unknown operator on line 5: a diagnostic
# in a fraction of a second (resolve reads on to the end of the file; no
# pass after it runs).
exec awk -v n=100000 -v name=chain-100k-error-line-5 -v error=1 -f chain.awk
