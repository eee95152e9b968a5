/*
 * cost_pipeline.c — a training iteration from the cost of a layer (see
 * cost_pipeline.h).
 */
#include "cost_pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "phases.h"

/* Bytes Adam moves per parameter: the fp16 gradient read (2), the fp32
 * master weight and both moments read and written (3 * 4 * 2), the fp16
 * weight written (2). */
#define ADAM_BYTES_PER_PARAM PIPELINE_ADAM_BYTES_PER_PARAM

static const ModelTensor *layer_input(const Model *m) {
    for (int i = 0; i < m->ntensors; ++i)
        if (m->tensors[i].role == TENSOR_INPUT)
            return &m->tensors[i];
    return NULL;
}

LinkClass pipeline_group_link(int devices_per_node, long stride, long members) {
    if (members < 2)
        return LINK_INTRA;
    /* Members r * stride, r < members: one node when the span fits. */
    return stride * (members - 1) / devices_per_node > 0 ? LINK_INTER : LINK_INTRA;
}

int cost_pipeline(const CostReport *r, long layers_in_report, const PipelineShape *sh,
                  const Profile *p, PipelineCost *out, char *err, size_t errlen) {
    const Model *model = r->schedule->model;
    const ModelTensor *x = layer_input(model);
    if (!x) {
        memset(out, 0, sizeof *out);
        snprintf(err, errlen, "model '%s' has no input: the pipeline needs the layer's input",
                 model->name);
        return 0;
    }
    /* One layer, one sequence: forward, and everything after it. */
    double fwd = 0, bwd = 0, fwd_flops = 0, bwd_flops = 0;
    for (int i = 0; i < r->nphases; ++i) {
        const PhaseCost *pc = &r->phases[i];
        int kind = pc->phase ? pc->phase->kind : PHASE_INIT;
        if (kind == PHASE_INIT)
            continue;
        if (kind == PHASE_FWD) {
            fwd += pc->time_us;
            fwd_flops += pc->flops;
        } else {
            bwd += pc->time_us;
            bwd_flops += pc->flops;
        }
    }
    long max_params = 0;
    for (int k = 0; k < r->memory.ndev; ++k)
        if (r->memory.params[k] > max_params)
            max_params = r->memory.params[k];
    const double per_layer = 1.0 / (double)layers_in_report, b = (double)sh->micro_batch;
    PipelineLayer l;
    memset(&l, 0, sizeof l);
    l.mesh_devices = r->ndev;
    l.devices_per_node = r->devices_per_node;
    l.seq_tokens = x->sizes[0];
    l.hidden = x->sizes[x->ndims - 1];
    l.elem_bytes = r->options.elem_bytes;
    /* A micro-batch of b sequences: b one-sequence layers, one after another. */
    l.fwd_us = b * fwd * per_layer;
    l.bwd_us = b * bwd * per_layer;
    l.fwd_flops = b * fwd_flops * per_layer / (double)r->ndev;
    l.bwd_flops = b * bwd_flops * per_layer / (double)r->ndev;
    l.params = (double)max_params * per_layer;
    return pipeline_compose(&l, sh, p, out, err, errlen);
}

long pipeline_stage_layers(long layers, long stages, int uneven) {
    if (stages < 1 || layers < stages)
        return 0;
    if (layers % stages == 0)
        return layers / stages;
    return uneven ? (layers + stages - 1) / stages : 0;
}

int pipeline_compose(const PipelineLayer *l, const PipelineShape *sh, const Profile *p,
                     PipelineCost *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->shape = *sh;
    const long t = l->mesh_devices, pp = sh->stages, v = sh->chunks, d = sh->replicas;
    if (pp < 1 || v < 1 || d < 1 || sh->layers < 1 || sh->micro_batch < 1 || sh->global_batch < 1 ||
        sh->vocab < 0) {
        snprintf(err, errlen, "stages, chunks, replicas, layers and batches must be positive");
        return 0;
    }
    if (v > 1 ? sh->layers % (pp * v) != 0 : !pipeline_stage_layers(sh->layers, pp, sh->uneven)) {
        snprintf(err, errlen, "%ld layers do not split into %ld stage%s of %ld chunk%s", sh->layers,
                 pp, pp == 1 ? "" : "s", v, v == 1 ? "" : "s");
        return 0;
    }
    if (v > 1 && pp == 1) {
        snprintf(err, errlen, "model chunks (interleaving) need more than one stage");
        return 0;
    }
    if (sh->global_batch % (sh->micro_batch * d) != 0) {
        snprintf(err, errlen,
                 "a global batch of %ld sequences is not a whole number of micro-batches of %ld "
                 "on %ld replicas",
                 sh->global_batch, sh->micro_batch, d);
        return 0;
    }
    out->mesh_devices = (int)t;
    out->devices = t * pp * d;
    out->micro_batches = sh->global_batch / (sh->micro_batch * d);
    out->seq_tokens = l->seq_tokens;
    out->hidden = l->hidden;
    const double elem = l->elem_bytes;
    const long m = out->micro_batches, b = sh->micro_batch;
    const long layers_per_stage = pipeline_stage_layers(sh->layers, pp, sh->uneven);
    /* Uneven stages: the last stage holds the fewest layers, L / p. */
    const long last_layers = sh->layers / pp;

    out->layer_fwd_us = l->fwd_us / (double)b;
    out->layer_bwd_us = l->bwd_us / (double)b;
    const double per_layer = l->fwd_us * (sh->recompute ? 2 : 1) + l->bwd_us;
    out->stage_us = (double)layers_per_stage * per_layer;

    /* The LM head: logits = x W^T over the vocabulary split on the mesh;
     * its backward is two GEMMs of the same size. */
    const double tokens = (double)b * (double)out->seq_tokens;
    const double vocab_dev = sh->vocab ? (double)((sh->vocab + t - 1) / t) : 0;
    double head_flops = 0;
    if (sh->vocab) {
        out->head_us = 3 * cost_gemm_us(p, tokens, vocab_dev, (double)out->hidden, 1, (int)elem);
        head_flops = 3 * 2 * tokens * vocab_dev * (double)out->hidden;
    }
    const double t_last = (double)last_layers * per_layer + out->head_us;
    const double t_max = t_last > out->stage_us ? t_last : out->stage_us;
    const double t_mean = (double)sh->layers / (double)pp * per_layer + out->head_us / (double)pp;

    /* Stage boundaries: each device sends its 1/t of the activation (and
     * receives its gradient) per micro-batch and model chunk. */
    if (pp > 1) {
        LinkClass link = pipeline_group_link(l->devices_per_node, t * d, 2);
        double bytes = tokens * (double)out->hidden * elem / (double)t;
        out->p2p_us = 2.0 * (double)v * cost_p2p_us(p, link, bytes);
    }
    out->bubble_us = (double)(pp - 1) / (double)v * (t_mean + out->p2p_us);
    out->pipeline_us = (double)m * (t_max + out->p2p_us) + out->bubble_us;

    /* Parameters of the busiest device: its stage's layers, and the
     * embedding on the first and the last stage (tied: held twice when
     * they differ). */
    out->params_device = l->params * (double)layers_per_stage + vocab_dev * (double)out->hidden;
    if (d > 1) {
        LinkClass link = pipeline_group_link(l->devices_per_node, t, d);
        out->allreduce_us =
            cost_collective_us(p, COMM_ALLREDUCE, link, out->params_device * elem, (int)d);
    }
    if (pp > 1 && sh->vocab) {
        LinkClass link = pipeline_group_link(l->devices_per_node, t * d * (pp - 1), 2);
        out->embedding_us =
            cost_collective_us(p, COMM_ALLREDUCE, link, vocab_dev * (double)out->hidden * elem, 2);
    }
    out->optimizer_us = out->params_device * ADAM_BYTES_PER_PARAM / (p->mem_bandwidth_GBps * 1e3);
    if (sh->shard_optimizer && d > 1)
        out->optimizer_us /= (double)d;
    out->iteration_us =
        out->pipeline_us + out->allreduce_us + out->embedding_us + out->optimizer_us;

    const double layer_flops_dev = l->fwd_flops * (sh->recompute ? 2 : 1) + l->bwd_flops;
    out->flops_device = (double)m * ((double)layers_per_stage * layer_flops_dev + head_flops);
    return 1;
}

void cost_pipeline_print(const PipelineCost *c, FILE *out) {
    const PipelineShape *s = &c->shape;
    fprintf(out,
            "pipeline: %ld layers in %d stage%s x %d chunk%s, %d data-parallel replica%s of the "
            "%d-device mesh (%ld devices); %ld micro-batches of %ld sequences per replica "
            "(global batch %ld)%s\n",
            s->layers, s->stages, s->stages == 1 ? "" : "s", s->chunks, s->chunks == 1 ? "" : "s",
            s->replicas, s->replicas == 1 ? "" : "s", c->mesh_devices, c->devices, c->micro_batches,
            s->micro_batch, s->global_batch, s->recompute ? ", activations recomputed" : "");
    fprintf(out, "  layer, one sequence: forward %.2f us, backward and gradients %.2f us\n",
            c->layer_fwd_us, c->layer_bwd_us);
    fprintf(out, "  per micro-batch: stage %.2f us, LM head %.2f us, stage sends %.2f us\n",
            c->stage_us, c->head_us, c->p2p_us);
    fprintf(out,
            "  iteration %.2f ms: pipeline %.2f ms (bubble %.2f ms), gradient all-reduce %.2f ms, "
            "embedding all-reduce %.2f ms, optimizer %.2f ms\n",
            c->iteration_us / 1e3, c->pipeline_us / 1e3, c->bubble_us / 1e3, c->allreduce_us / 1e3,
            c->embedding_us / 1e3, c->optimizer_us / 1e3);
    fprintf(out,
            "  per device: %.4g parameters, %.4g FLOP counted per iteration, %.1f TFLOP/s "
            "counted\n",
            c->params_device, c->flops_device,
            c->iteration_us > 0 ? c->flops_device / c->iteration_us / 1e6 : 0.0);
}

json_t *cost_pipeline_json(const PipelineCost *c) {
    const PipelineShape *s = &c->shape;
    json_t *o = json_object();
    const struct {
        const char *name;
        long value;
    } ints[] = {
        {"stages", s->stages},
        {"chunks", s->chunks},
        {"replicas", s->replicas},
        {"layers", s->layers},
        {"micro_batch", s->micro_batch},
        {"global_batch", s->global_batch},
        {"vocab", s->vocab},
        {"mesh_devices", c->mesh_devices},
        {"devices", c->devices},
        {"micro_batches", c->micro_batches},
        {"seq_tokens", c->seq_tokens},
        {"hidden", c->hidden},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; ++i)
        json_object_set_new(o, ints[i].name, json_integer(ints[i].value));
    json_object_set_new(o, "recompute", json_boolean(s->recompute));
    const struct {
        const char *name;
        double value;
    } reals[] = {
        {"layer_fwd_us", c->layer_fwd_us},
        {"layer_bwd_us", c->layer_bwd_us},
        {"stage_us", c->stage_us},
        {"head_us", c->head_us},
        {"p2p_us", c->p2p_us},
        {"pipeline_us", c->pipeline_us},
        {"bubble_us", c->bubble_us},
        {"allreduce_us", c->allreduce_us},
        {"embedding_us", c->embedding_us},
        {"optimizer_us", c->optimizer_us},
        {"iteration_us", c->iteration_us},
        {"params_device", c->params_device},
        {"flops_device", c->flops_device},
    };
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; ++i)
        json_object_set_new(o, reals[i].name, json_real(reals[i].value));
    return o;
}
