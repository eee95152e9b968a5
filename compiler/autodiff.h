/*
 * autodiff.h — reverse-mode derivatives of operator bodies.
 *
 * An operator body `Y[...] += e` (or `Y = e`) is an expression over the
 * operator's input tensors, integer constants, + - * / and intrinsics.
 * The backward and gradient phases are, per input X,
 *     dX[dims of X] += dY[dims of Y] * (de / dX)
 * summed over the dimensions X lacks; this pass builds de/dX
 * symbolically with the built-in derivative rules of the intrinsics, and
 * folds multiplications by 0 and 1.
 *
 * The derivative is a DAG: it points into the body's expression (the
 * factors of a product rule, the argument of exp) instead of copying
 * it, and every subexpression is differentiated once, so building it
 * takes time linear in the body's size. Printed or walked as a tree it
 * can be larger (about size x depth of the body); it is bounded by
 * AD_MAX_NODES.
 */
#ifndef PRIMEC_AUTODIFF_H
#define PRIMEC_AUTODIFF_H

#include "ast.h"
#include "diag.h"

/* The most nodes a derivative may have as a tree (Expr.nodes). */
#define AD_MAX_NODES 50000

/* de/d(tensor named wrt). On an intrinsic without a derivative rule,
 * reports at the call and returns NULL; a derivative beyond AD_MAX_NODES
 * is reported at e and gives NULL. */
Expr *ad_derive(Arena *arena, DiagSink *sink, const Expr *e, Sym wrt);

/* Is e the constant 0? */
int ad_is_zero(const Expr *e);

#endif
