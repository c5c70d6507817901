"""What the tests share that is no test: case tables (bad_inputs*), kernels of a user's own (user_kernel, byo_*: the
NumPy ones, the .cu ones and their builds), the layering checker, fake arrays, edge-timeout children, struct-layout
checks, the bank-probe cases and the screenshot renderer. Tests import them as `support.<module>` (pytest puts
tests/ on sys.path); pytest collects nothing here (no test_*.py)."""
