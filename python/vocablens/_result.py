"""Result: what every analysis returns (the C++ vocablens::Result, seen from Python)."""
import os

from . import _vocablens as _core


def _integer_column(name):
    n = name.lower()
    return (n in ("id", "layer", "head", "position", "index", "rank", "neuron", "count", "step")
            or n.endswith(("_id", "_index", "_rank", "rank", "_position", "_count")) or n.startswith("rank"))


def _tidy(df):
    """Integer columns stay integers in a notebook: ids, ranks, positions, heads with missing cells (None,
    which pandas would make float64 NaN) become pandas' nullable Int64, and a `layer` column of labels
    ("embed", "3.mid", "3") becomes the layer axis index of the arrays (0, 1, ...) with the labels kept in
    a `layer_label` column (added last). The CSV files keep the CLI's exact cells."""
    import pandas as pd
    for col in df.columns:
        s = df[col]
        if not _integer_column(col) or s.dtype.kind not in "fO":
            continue
        vals = s.dropna()
        if len(vals) and all(isinstance(v, int) and not isinstance(v, bool) or
                             (isinstance(v, float) and v.is_integer()) for v in vals):
            df[col] = s.astype("Int64")
    if "layer" in df.columns and df["layer"].dtype == object and "layer_label" not in df.columns:
        labels = df["layer"]
        if labels.map(lambda v: isinstance(v, str) or v is None).all():
            order = {lab: i for i, lab in enumerate(pd.unique(labels.dropna()))}
            df["layer_label"] = labels
            df["layer"] = labels.map(order).astype("Int64")
    return df


class Result:
    """One analysis's output: `kind`, `settings`, `provenance`, `summary` (dicts), `arrays` (name ->
    numpy array, sharing memory with the result), `tables` (name -> pandas DataFrame).

    `save(dir)` writes the run directory the CLI writes with --out (JSON + .npy + CSV);
    `report(path)` writes the HTML report of this result.
    """

    def __init__(self, core):
        if not isinstance(core, _core.Result):
            raise TypeError("Result wraps a vocablens._vocablens.Result; analyses create them")
        self._core = core
        self._arrays = None
        self._tables = None

    @property
    def kind(self):
        return self._core.kind

    @property
    def settings(self):
        return self._core.settings

    @property
    def provenance(self):
        return self._core.provenance

    @property
    def summary(self):
        return self._core.summary

    @property
    def arrays(self):
        """name -> numpy.ndarray (C order; views of the result's memory)."""
        if self._arrays is None:
            self._arrays = {n: self._core.array(n) for n in self._core.array_names()}
        return self._arrays

    def tensor(self, name):
        """The array `name` as a torch.Tensor (shares memory with the numpy array)."""
        import torch
        return torch.from_numpy(self.arrays[name])

    @property
    def tables(self):
        """name -> pandas.DataFrame (one row per CSV row the CLI writes)."""
        if self._tables is None:
            try:
                import pandas as pd
            except ImportError as e:  # pragma: no cover - setup.sh installs python3-pandas
                raise ImportError("Result.tables needs pandas (Debian: python3-pandas); "
                                  "Result.table_rows() gives plain lists") from e
            self._tables = {name: _tidy(pd.DataFrame(rows, columns=columns))
                            for name, columns, rows in self._core.tables()}
        return self._tables

    def table_rows(self):
        """[(name, columns, rows)] without pandas."""
        return self._core.tables()

    def save(self, dir, *, report=False, json=True, npy=True, csv=True):
        """Writes the run directory (<kind>.json, <kind>.<array>.npy, <kind>.<table>.csv; atomically), and with
        report=True also report.html and vocablens.ipynb for everything in `dir` (like --report).
        Returns the paths written."""
        dir = os.fspath(dir)
        paths = self._core.save(dir, json, npy, csv)
        if report:
            results = _core.load_results(dir)
            paths.append(_core.report(results, os.path.join(dir, "report.html"), dir, ""))
            paths.append(_core.notebook(results, dir))
        return paths

    def report(self, path, *, title=""):
        """Writes the HTML report of this result to `path` (a file, or a directory: then path/report.html)."""
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, "report.html")
        return _core.report([self._core], path, "", title)

    def to_json(self, inline_arrays=False):
        """The <kind>.json document (arrays inline as lists with inline_arrays=True)."""
        return self._core.to_json(inline_arrays)

    def __repr__(self):
        return "<vocablens.Result {}: arrays [{}], tables [{}]>".format(
            self.kind, ", ".join(self._core.array_names()), ", ".join(t[0] for t in self._core.tables()))


def load_results(dir):
    """Reads a run directory (written by the CLI or by Result.save) back: a list of Results. A path that is
    not a directory, or one that holds no result, is a vocablens.FormatError naming it."""
    if not isinstance(dir, (str, os.PathLike)):
        raise TypeError("load_results(): dir must be a str or os.PathLike, not " + type(dir).__name__)
    dir = os.fspath(dir)
    if not os.path.isdir(dir):
        raise _core.FormatError("{}: {}".format(dir, "not a directory" if os.path.exists(dir) else "no such directory"))
    results = _core.load_results(dir)
    if not results:
        # An empty list would read as "this run found nothing" when the path is not a run directory at all.
        raise _core.FormatError("{}: no vocablens results here (a run directory holds <kind>.json files written "
                                "by `vocablens ... --out DIR` or Result.save)".format(dir))
    return [Result(r) for r in results]


def report(results, path, *, title=""):
    """One HTML report for several results (a list of Result)."""
    cores = []
    for i, r in enumerate(results):
        if not isinstance(r, Result):
            raise TypeError("report(): results[{}] must be a vocablens.Result, not {}".format(i, type(r).__name__))
        cores.append(r._core)
    return _core.report(cores, os.fspath(path), "", title)
