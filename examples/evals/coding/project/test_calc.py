"""The calculator's tests: python3 test_calc.py exits 0 when they pass."""

from calc import add, mul

assert mul(3, 4) == 12, "mul"
assert add(2, 3) == 5, f"add(2, 3) is {add(2, 3)}, not 5"
print("all tests pass")
