# chain.awk -v n=N -v name=CASE [-v error=1]: a model of N chained
# instances, each reading the one before and the one weight w (the
# chain-*.sh cases); with error, no header comment and an unknown
# operator on line 5.
BEGIN {
    if (!error)
        printf "// %d chained instances (tests/golden/gen/%s.sh).\n", n, name
    print "model chain {"
    print "    param m = 64, k = 64;"
    print "    mesh(d: 4);"
    print "    input x0[m, k];"
    if (error)
        print "    y = no_such_op(x0);"
    print "    weight w[k, k];"
    for (i = 1; i <= n; i++)
        printf "    x%d = matmul(x%d, w) use row;\n", i, i - 1
    print "}"
}
