#!/usr/bin/env python3
"""The OPT decoder layer of examples/opt_layer.prime in JAX, Megatron-LM
sharding over 4 host devices: one training step (forward, backward and
weight gradients of half the sum of squares of the output, as the primec
model's loss) timed after compilation. Run by bench/step_xla.py inside
its venv with XLA_FLAGS=--xla_force_host_platform_device_count=4.

    opt_layer_jax.py S H A E F LAYERS REPEAT

prints one JSON line: {"step_s": [...], "cpu_s": [...], "devices": N}
(wall and processor time of each step, all of the process's threads).
"""
import json
import sys
import time

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


def layer_norm(x, g, b):
    # As norm_mean, norm_var, norm_apply, scale_shift: eps 1e-5.
    m = jnp.mean(x, axis=1, keepdims=True)
    v = jnp.mean((x - m) * (x - m), axis=1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b


def layer(x, p):
    s = x.shape[0]
    e = p["wq"].shape[2]
    l1 = layer_norm(x, p["g1"], p["b1"])
    q = jnp.einsum("sh,hae->sae", l1, p["wq"]) + p["bq"]
    k = jnp.einsum("sh,hae->sae", l1, p["wk"])
    v = jnp.einsum("sh,hae->sae", l1, p["wv"]) + p["bv"]
    sc = jnp.einsum("sae,kae->ask", q, k) * jax.lax.rsqrt(float(e))
    causal = jnp.arange(s)[None, :, None] >= jnp.arange(s)[None, None, :]
    sc = jnp.where(causal, sc, -1e9)
    pr = jax.nn.softmax(sc, axis=2)
    o = jnp.einsum("ask,kae->sae", pr, v)
    at = jnp.einsum("sae,aeh->sh", o, p["wo"]) + p["bo"]
    r1 = at + x
    l2 = layer_norm(r1, p["g2"], p["b2"])
    hd = jax.nn.relu(l2 @ p["w1"] + p["c1"])
    return hd @ p["w2"] + p["c2"] + r1


def loss(params, x):
    for p in params:
        x = layer(x, p)
    return 0.5 * jnp.sum(x * x)


def main():
    s, h, a, e, f, layers, repeat = (int(v) for v in sys.argv[1:8])
    devices = jax.devices()
    mesh = Mesh(devices, ("d",))
    # Megatron-LM: q, k, v and the output projection split by heads, fc1
    # by columns, fc2 by rows; norms, biases after a row split and the
    # activations replicated.
    specs = {
        "g1": P(None), "b1": P(None), "wq": P(None, "d", None), "bq": P("d", None),
        "wk": P(None, "d", None), "wv": P(None, "d", None), "bv": P("d", None),
        "wo": P("d", None, None), "bo": P(None), "g2": P(None), "b2": P(None),
        "w1": P(None, "d"), "c1": P("d"), "w2": P("d", None), "c2": P(None),
    }
    shapes = {
        "g1": (h,), "b1": (h,), "wq": (h, a, e), "bq": (a, e), "wk": (h, a, e),
        "wv": (h, a, e), "bv": (a, e), "wo": (a, e, h), "bo": (h,), "g2": (h,),
        "b2": (h,), "w1": (h, f), "c1": (f,), "w2": (f, h), "c2": (h,),
    }
    key = jax.random.PRNGKey(0)
    params = []
    for _ in range(layers):
        p = {}
        for name, shape in shapes.items():
            key, sub = jax.random.split(key)
            fan = shape[0] if len(shape) > 1 else 1
            scale = (3.0 / fan) ** 0.5 if len(shape) > 1 else 1.0
            val = jax.random.uniform(sub, shape, jnp.float32, -scale, scale)
            p[name] = jax.device_put(val, NamedSharding(mesh, specs[name]))
        params.append(p)
    key, sub = jax.random.split(key)
    x = jax.device_put(jax.random.uniform(sub, (s, h), jnp.float32, -1, 1),
                       NamedSharding(mesh, P(None, None)))
    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    jax.block_until_ready(step(params, x))  # compile and warm up
    times, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(step(params, x))
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(json.dumps({"step_s": times, "cpu_s": cpu, "devices": len(devices)}))


if __name__ == "__main__":
    main()
