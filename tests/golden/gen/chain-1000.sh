#!/bin/sh
# 1,000 chained instances, each reading the one before and the one weight
# w: scheduling is linear in the chain (it used to be quadratic: minutes).
exec awk -v n=1000 -v name=chain-1000 -f chain.awk
