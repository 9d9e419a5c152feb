"""A Python dataset as a Loader's source: the callback the library's worker threads
call for a batch's encoded images and labels (ffpy_dataset.c)."""
import operator
from collections.abc import Mapping

_IMAGE_KEYS = ("image", "img", "jpg", "jpeg", "png", "webp")  # Hugging Face's, then WebDataset's names
_LABEL_KEYS = ("label", "labels", "cls", "target")


class DatasetFetcher:
    """Turns a dataset's items into (bytes, label), or a str saying why not, for a
    list of indices at once: what the library's worker threads ask for, one batch
    per call (one hold of the GIL). Items are (encoded bytes, int label) pairs, or
    mappings with an image and a label entry (a Hugging Face row: the image
    column cast to ``Image(decode=False)`` is ``{"bytes": ..., "path": ...}``).

    An exception that is not an Exception (KeyboardInterrupt, SystemExit) is no
    sample's failure: it is kept in ``pending_exit``, the call's samples fail
    without asking the dataset again, and the consumer raises it at its next
    ``next`` (Loader._raise_pending_exit) whatever ``on_error`` says; the dataset
    is asked nothing more (``halted``) until the consumer's next call, which makes
    the batches prepared meanwhile again (Loader._resume_fetcher)."""

    def __init__(self, dataset, image_key, label_key):
        self.dataset = dataset
        self.image_key = image_key
        self.label_key = label_key
        self.getitems = getattr(dataset, "__getitems__", None)  # torch's and Hugging Face's batch access
        self.pending_exit = None
        self.halted = False  # raised to the consumer, which has not called again (Loader._resume_fetcher)

    def __call__(self, indices):
        if self.pending_exit is None and not self.halted:
            try:
                return self._fetch(indices)
            except BaseException as e:  # not an Exception: _fetch keeps those per item
                self.pending_exit = e
        what = "an exception" if self.pending_exit is None else type(self.pending_exit).__name__
        text = f"{what} raised by the dataset (the loader raises it again)"
        return [text] * len(indices)

    def _fetch(self, indices):
        items = None
        if self.getitems is not None and len(indices) > 1:
            try:
                items = list(self.getitems(indices))
            except Exception:  # one of them fails: ask one by one to know which
                items = None
            if items is not None and len(items) != len(indices):
                items = None
        out = []
        for k, index in enumerate(indices):
            try:
                out.append(self._parse(items[k] if items is not None else self.dataset[index]))
            except Exception as e:
                out.append(f"{type(e).__name__}: {e}")
        return out

    def _key(self, item, wanted, choices, what):
        if wanted is not None:
            return item[wanted]
        for key in choices:
            if key in item:
                return item[key]
        raise KeyError(f"the item has no {what} entry (looked for {', '.join(map(repr, choices))}; "
                       f"it has {', '.join(map(repr, item))}): pass {what}_key=")

    def _parse(self, item):
        if isinstance(item, Mapping):
            data = self._key(item, self.image_key, _IMAGE_KEYS, "image")
            label = self._key(item, self.label_key, _LABEL_KEYS, "label")
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            data, label = item
        elif isinstance(item, (tuple, list)):
            raise TypeError(f"expected (encoded bytes, label), got a {type(item).__name__} of {len(item)} items "
                            f"(map the dataset to pairs: a third element has no meaning to the loader)")
        else:
            raise TypeError(f"expected (encoded bytes, label) or a mapping with an image and a label, "
                            f"got {type(item).__name__}")
        if isinstance(data, Mapping):  # Hugging Face Image(decode=False)
            raw, path = data.get("bytes"), data.get("path")
            if raw is None and path:
                with open(path, "rb") as f:
                    raw = f.read()
            data = raw
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        if not isinstance(data, bytes):
            hint = (" (a decoded image: cast the column with datasets.Image(decode=False))"
                    if type(data).__module__.startswith("PIL") else "")
            raise TypeError(f"expected the encoded image as bytes, got {type(data).__name__}{hint}")
        if isinstance(label, bool):
            raise TypeError("the label is a bool, expected an int")
        label = operator.index(label.item() if hasattr(label, "item") else label)
        if label < 0:
            raise ValueError(f"the label is {label}, expected >= 0")
        return data, label
