"""A JAX (XLA) matmul in bf16: `drvtma audit -- python jax_matmul.py`. Needs jax with CUDA."""

import jax
import jax.numpy as jnp

a = jax.random.normal(jax.random.PRNGKey(0), (1024, 512), dtype=jnp.bfloat16)
b = jax.random.normal(jax.random.PRNGKey(1), (512, 768), dtype=jnp.bfloat16)
print("jax matmul", float(jax.jit(lambda x, y: (x @ y).astype(jnp.float32).sum())(a, b)))
