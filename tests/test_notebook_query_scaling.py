"""notebooks/query_scaling.ipynb executes and reproduces the paper's examples (digest §4.4, §6.2).

One test executes it once (about 6 s) and checks it three ways: a module fixture shared by three tests was
executed again on every xdist worker that drew one of them."""

from __future__ import annotations

from conftest import execute_notebook


def test_notebook_runs_reproduces_the_targets_and_draws_the_power_curves():
    notebook, text = execute_notebook("query_scaling")
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    # fixed data (digest §6.2): ξ* and ratios, the power example, the end-to-end σ
    assert "[2.5   0.625] volume ratio 0.8" in text and "volume ratio 0.00511841" in text
    assert "power 0.722812 vs xi=1 0.408797" in text and "sigma = 37.3063350" in text
    # Table 1 privacy sets and Example 1 at ε = 1 (digest §4.4): D(g), D(fg), C; powers [a]–[d]
    assert " 1  27.856341  1.055582  8.899065  6.874520          True" in text
    assert " 4  38.258336  0.874738  5.214533  4.248226          True" in text
    assert " 1     1  0.2026  0.3666  0.4759  0.6499  1.090e-02  4.280e-02" in text
    assert "Fact thresholds 1 - F(2k): {6: 0.061969, 10: 0.029253, 20: 0.004995, 30: 0.000921}" in text
    assert len([out for out in outputs if "image/png" in out.get("data", {})]) == 1
