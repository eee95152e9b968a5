#!/bin/sh
# 3,000 chained instances, each reading the one before and the one weight
# w: scheduling is linear in the chain (it used to be quadratic: minutes).
n=3000
awk -v n=$n 'BEGIN {
    printf "// %d chained instances (tests/golden/gen/chain-3000.sh).\n", n
    print "model chain {"
    print "    param m = 64, k = 64;"
    print "    mesh(d: 4);"
    print "    input x0[m, k];"
    print "    weight w[k, k];"
    for (i = 1; i <= n; i++)
        printf "    x%d = matmul(x%d, w) use row;\n", i, i - 1
    print "}"
}'
