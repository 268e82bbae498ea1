"""The privacy report speaks in user terms (newcomer trial, friction 5).

Its last line used to read "mechanism.map(k * sensitivity) for a Release", internal API in a
user-facing text.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

from pymc_dp.distributions.privatized import Privatized
from pymc_dp.distributions.release import Release
from pymc_dp.mechanisms.geometric import Geometric
from pymc_dp.mechanisms.laplace import Laplace
from pymc_dp.privacy import privacy_report


def _report():
    with pm.Model() as m:
        lam = pm.Gamma("lam", np.float64(2.0), np.float64(0.5))
        Privatized("y", pm.Poisson.dist(lam), Geometric(epsilon=0.5), observed=np.array([3, 5]))
        x = pm.Bernoulli("x", p=0.5, shape=4)
        Release("z", x.sum(), Laplace(epsilon=1.0), observed=2.0)
    return privacy_report(m, contributions=2)


def test_report_text_has_no_internal_api_names():
    report = _report()
    text = str(report)
    composition = report.to_dict()["composition"]
    for s in (text, composition):
        assert "map(" not in s and "mechanism.map" not in s
    assert "k times the sensitivity" in text and "k separate releases" in text
    assert "`contributions` times the sensitivity" in composition
    # the figures themselves are unchanged: 2 values of each node, 2 * 0.5 + 2 * 1.0
    assert report.total.epsilon == 3.0
