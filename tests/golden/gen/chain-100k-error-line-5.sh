#!/bin/sh
# 100,000 chained instances and an unknown operator on line 5: a diagnostic
# in a fraction of a second (resolve reads on to the end of the file; no
# pass after it runs).
n=100000
awk -v n=$n 'BEGIN {
    print "model chain {"
    print "    param m = 64, k = 64;"
    print "    mesh(d: 4);"
    print "    input x0[m, k];"
    print "    y = no_such_op(x0);"
    print "    weight w[k, k];"
    for (i = 1; i <= n; i++)
        printf "    x%d = matmul(x%d, w) use row;\n", i, i - 1
    print "}"
}'
