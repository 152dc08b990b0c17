"""What every process of the system shares at start-up: the settings base (`settings`: the
model store, logging; env prefix `NMT_`) and the one start-up path (`startup`: flags over
the environment, invalid settings -> exit status 2, logging, run).

`server/__main__.py` (nmt-server) and `trainer/__main__.py` (nmt-trainer) start through it.
"""
