/*
 * compose.h — composite operators: an operator written as a small graph
 * of other operators,
 *
 *   op layernorm(x[s, h], g[h], b[h]) -> y[s, h] = {
 *       mu = norm_mean(x); var = norm_var(x, mu);
 *       n = norm_apply(x, mu, var); y = scale_shift(n, g, b);
 *   }
 *
 * expanded where a model uses it. `l1 = layernorm(x, g1, b1);` becomes the
 * instances l1_mu, l1_var, l1_n and l1 (the part computing the result
 * takes the use's name; `l1_y` names it alone in a plan). Composites
 * nest: a part of a part of l1 is l1_PART_PART. The expansion is a model
 * declaration with the parts written out, so resolution, plans and every
 * later pass see only operators (docs/language.md, "Composite operators").
 */
#ifndef PRIMEC_COMPOSE_H
#define PRIMEC_COMPOSE_H

#include "resolve_internal.h"

/* Checks every composite of the programs, after the operators are
 * resolved: names, signatures, parts (their operators, arguments and
 * dimensions, by name), cycles. */
void compose_declare(Resolver *r);

/* Is `name` a composite? */
int compose_is_composite(const Resolver *r, Sym name);

/* The model with every use of a composite expanded into its parts (each
 * part preceded by one MITEM_COMPOSITE item that checks the use's
 * arguments), or decl itself when it uses none. */
const ModelDecl *compose_model(Resolver *r, const ModelDecl *decl);

/* Checks the arguments of a use (a MITEM_COMPOSITE item) against its
 * composite's signature; args[i] is argument i's tensor. 0 after
 * reporting (or silently when the composite itself is in error). */
int compose_check_use(Resolver *r, const ModelItem *use, const ModelTensor *const *args);

#endif
