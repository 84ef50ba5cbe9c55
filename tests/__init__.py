import sys

# Where PYTHONDONTWRITEBYTECODE is set (as on this project's machines), every test run compiled
# the project and compiled and assertion-rewrote the test modules again: about 6 s of the fast
# tier's minute. The test process keeps its bytecode (git ignores __pycache__).
sys.dont_write_bytecode = False
