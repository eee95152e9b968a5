#!/bin/sh
# 3,000 chained instances, each reading the one before and the one weight
# w: scheduling is linear in the chain (it used to be quadratic: minutes).
exec awk -v n=3000 -v name=chain-3000 -f chain.awk
