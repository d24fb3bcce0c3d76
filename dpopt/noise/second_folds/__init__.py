r"""Second folds of R²DP: laws of the Laplace *rate* t = 1/b, through their MGFs.

R²DP (Mohammady et al., CCS 2020) adds Laplace noise whose scale b is itself random.
Everything is written in terms of t = 1/b ≥ 0 and its moment-generating function
:math:`M(u) = \mathbb E[e^{u t}]`: the noise density is :math:`f(x) = \tfrac12 M'(-|x|)`,
its tail :math:`P(Z > x) = \tfrac12 M(-x)` (x ≥ 0; the paper's eq. 10–11), and the exact
privacy for a shift Δ is :math:`\varepsilon = \ln(\mathbb E[t] / M'(-\Delta))` (Thm 4.1).

Each family states its local facts, all numerically stable for the arguments used:

* ``log_mgf(u)`` and ``dlog_mgf(u)`` = M'(u)/M(u) (so ``log M'(u) = log_mgf + log dlog_mgf``),
  vectorised, in the log domain (truncated Gaussian through ``erfcx``/``log_ndtr``;
  uniform through ``expm1``; Rayleigh with its asymptotic series where ``1 + σu√(π/2)
  erfcx(·)`` cancels, digest P8);
* ``mgf_mp(u)`` / ``mgf_prime_mp(u)``: a *separate* closed-form evaluation in mpmath
  (used by the certificate's independent 60-digit privacy check);
* ``mean()`` = E[t] = M'(0); ``inverse_moment(p)`` = E[t^{-p}] (so E|Z| = E[1/t] and
  E Z² = 2 E[1/t²], Table 1), ``inf`` when it diverges (digest P9);
* ``sample(rng, size)``, ``scaled(c)`` (the law of c·t), ``parameters`` (JSON, with ``kind``).

The paper's "linear combination" ``t = Σ a_i X_i`` of independent folds is :class:`SumFold`
(MGF a product, Thm 3.2); its coefficients are absorbed in the components' scales, which
they duplicate (digest §1.6). A finite mixture (:class:`DiscreteFold`) is what the global
LP over mixture weights returns; Bernoulli (Example 3.1) is its two-atom case and the
Laplace mechanism its one-atom case.
"""

from dpopt.noise.second_folds.base import SecondFold, inverse_moment_from_mgf
from dpopt.noise.second_folds.closed_form import GammaFold, NoncentralChi2Fold, RayleighFold, UniformFold
from dpopt.noise.second_folds.discrete import DiscreteFold
from dpopt.noise.second_folds.parameters import fold_from_parameters
from dpopt.noise.second_folds.sum import SumFold
from dpopt.noise.second_folds.truncated_normal import TruncatedNormalFold

__all__ = [
    "DiscreteFold",
    "GammaFold",
    "NoncentralChi2Fold",
    "RayleighFold",
    "SecondFold",
    "SumFold",
    "TruncatedNormalFold",
    "UniformFold",
    "fold_from_parameters",
    "inverse_moment_from_mgf",
]
