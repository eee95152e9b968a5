/*
 * plan_replica.c — whether a plan's data-parallel replicas can be
 * written as one longer mesh axis (see plan.h, plan_replica_axis).
 */
#include "plan.h"
#include "plan_internal.h"

/* Whether expression e names sym anywhere (an index's dimension names
 * are not expressions). Expressions are bounded in depth by the parser. */
static int mentions(const Expr *e, Sym sym) {
    if (!e)
        return 0;
    if ((e->kind == EXPR_NAME || e->kind == EXPR_CALL) && e->name == sym)
        return 1;
    if (mentions(e->lhs, sym) || mentions(e->rhs, sym))
        return 1;
    if (e->kind == EXPR_CALL || e->kind == EXPR_RADIX)
        for (int i = 0; i < e->args.count; ++i)
            if (mentions(e->args.items[i], sym))
                return 1;
    return 0;
}

/* Whether partition axis k of part may grow with the replicas: its size
 * is a name no other axis, step or DSI uses, every dimension in `tok` has
 * exactly the axis as its DSI, and no other dimension's DSI mentions it. */
int plan_is_replica_axis(const Partition *part, int k, unsigned tok, int ndims) {
    const AxisDecl *ax = part->axes[k];
    if (!ax->size || ax->size->kind != EXPR_NAME)
        return 0;
    Sym size = ax->size->name, name = ax->name.name;
    for (int a = 0; a < part->naxes; ++a)
        if (a != k && mentions(part->axes[a]->size, size))
            return 0;
    if (part->steps && mentions(part->steps->size, size))
        return 0;
    for (int d = 0; d < ndims; ++d) {
        const DsiAssign *dsi = part->dsi[d];
        if (tok & (1u << d)) {
            if (!dsi || dsi->value->kind != EXPR_NAME || dsi->value->name != name)
                return 0;
        } else if (dsi && (mentions(dsi->value, name) || mentions(dsi->value, size))) {
            return 0;
        }
    }
    return 1;
}

int plan_replica_axis(const Plan *plan) {
    const Planner *p = plan->planner;
    if (!p || !p->token_dims)
        return -1;
    /* The axis every instance with tokens splits them along. */
    int axis = -1;
    for (int i = 0; i < plan->ninst; ++i) {
        const PlanCandidate *pc = plan->cands[i].items[plan->choice[i]];
        const unsigned tok = p->token_dims[i];
        if (!tok)
            continue;
        int found = -1;
        for (int k = 0; k < pc->partition->naxes && found < 0; ++k)
            if (plan_is_replica_axis(pc->partition, k, tok, pc->inst.op->ndims))
                found = pc->axis_map[k];
        if (found < 0 || (axis >= 0 && found != axis))
            return -1;
        axis = found;
    }
    /* An instance without tokens is the same on every replica: none of
     * its partition's axes may lie along the replica axis. */
    for (int i = 0; axis >= 0 && i < plan->ninst; ++i) {
        const PlanCandidate *pc = plan->cands[i].items[plan->choice[i]];
        for (int k = 0; !p->token_dims[i] && k < pc->partition->naxes; ++k)
            if (pc->axis_map[k] == axis)
                return -1;
    }
    return axis;
}
