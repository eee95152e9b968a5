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
 */
#ifndef PRIMEC_AUTODIFF_H
#define PRIMEC_AUTODIFF_H

#include "ast.h"
#include "diag.h"

/* de/d(tensor named wrt). On an intrinsic without a derivative rule,
 * reports at the call and returns NULL. */
Expr *ad_derive(Arena *arena, DiagSink *sink, const Expr *e, Sym wrt);

/* Is e the constant 0? */
int ad_is_zero(const Expr *e);

#endif
