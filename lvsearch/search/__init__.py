"""Architecture search over a trained supernet: fitness evaluator (memo + prefix cache),
DEAP evolution (LV-BERT Algorithm 1), random search, NSGA-II, resumable state, rank check.

Heavy imports (torch, deap, matplotlib) happen inside the submodules.
"""
