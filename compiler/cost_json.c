/*
 * cost_json.c — a CostReport as JSON (`primec cost --json`, cost.h).
 *
 * Times, flops and the capacity are doubles written with 6 significant
 * digits (JSON_REAL_PRECISION(6)); bytes and counts are integers.
 */
#include "cost.h"
#include "json_out.h"

static json_t *longs(const long *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; ++i)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *phase_json(const CostReport *r, const PhaseCost *pc) {
    const Schedule *s = r->schedule;
    json_t *steps = json_array();
    for (int st = 0; st < pc->nsteps; ++st)
        json_array_append_new(steps, json_pack("{s:f, s:f, s:f}", "time_us", pc->steps[st].time_us,
                                               "compute_us", pc->steps[st].compute_us, "comm_us",
                                               pc->steps[st].comm_us));
    return json_pack(
        "{s:s, s:s, s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:{s:I, s:I, s:I}, s:I, s:o}",
        "name", pc->name, "kind", phase_name(pc->phase->kind), "instance",
        pc->phase->inst >= 0 ? json_string(s->model->instances[pc->phase->inst].name) : json_null(),
        "time_us", pc->time_us, "prologue_us", pc->prologue_us, "compute_us", pc->compute_us,
        "shift_us", pc->shift_us, "collective_us", pc->collective_us, "redist_us", pc->redist_us,
        "exposed_us", pc->exposed_us, "flops", pc->flops, "bytes", "shift",
        (json_int_t)pc->shift_bytes, "redist", (json_int_t)pc->redist_bytes, "collective",
        (json_int_t)pc->collective_bytes, "peak_bytes", (json_int_t)pc->peak_bytes, "steps", steps);
}

json_t *cost_json(const CostReport *r) {
    const Schedule *s = r->schedule;
    json_t *phases = json_array();
    for (int q = 0; q < r->nphases; ++q)
        json_array_append_new(phases, phase_json(r, &r->phases[q]));
    const TrainingMemory *m = &r->memory;
    json_t *memory =
        json_pack("{s:i, s:I, s:o, s:o, s:o, s:I, s:f, s:b}", "bytes_per_param", 16, "model_params",
                  (json_int_t)m->model_params, "params", longs(m->params, m->ndev), "state_bytes",
                  longs(m->state_bytes, m->ndev), "total_bytes", longs(m->total_bytes, m->ndev),
                  "max_total_bytes", (json_int_t)m->max_total_bytes, "capacity_bytes",
                  m->capacity_bytes, "fits", m->fits);
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:{s:I, s:I, s:I, s:I}, "
                     "s:o, s:I, s:o, s:o}",
                     "model", s->model->name, "profile", r->profile, "devices", r->ndev,
                     "devices_per_node", r->devices_per_node, "elem_bytes", r->options.elem_bytes,
                     "step_us", r->step_us, "compute_us", r->compute_us, "comm_us", r->comm_us,
                     "exposed_comm_us", r->exposed_comm_us, "flops", r->flops, "bytes", "shift",
                     (json_int_t)r->shift_bytes, "redist", (json_int_t)r->redist_bytes, "p2p",
                     (json_int_t)r->p2p_bytes, "collective", (json_int_t)r->collective_bytes,
                     "peak_bytes", longs(r->peak_bytes, r->ndev), "max_peak_bytes",
                     (json_int_t)r->max_peak_bytes, "phases", phases, "training_memory", memory);
}

void cost_print_json(const CostReport *r, FILE *out) {
    json_out(out, cost_json(r), COST_JSON_FLAGS);
}
