/* _fusionflow.c — the C extension under the `fusionflow` Python package: a thin
 * layer over the public header (include/fusionflow/fusionflow.h) and nothing
 * else of the library (but for the tests' stand-in for a trainer's late GPU
 * copy on the emulator: ffpy_late_copy.c). This file is the module: its
 * functions (augment_image, image_plan, recipes, version, ...), the helpers
 * every object shares (ffpy_common.h) and the init that adds the objects:
 *
 *   CLoader       ffpy_loader.c (opened by open_loader, ffpy_open.c; stats, ffpy_stats.c)
 *   Tensor        ffpy_tensor.c (DLPack export of batches and images)
 *   CAugmenter    ffpy_augmenter.c;  RemoteQueue  ffpy_remote.c
 *
 * Errors: a failing call raises the exception that fusionflow._errors builds
 * for (status, library message); the factory is registered by __init__.py. */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03090000 /* the stable ABI of CPython 3.9: one abi3 build serves every later CPython */
#endif
#include <Python.h>

#include <stdio.h>
#include <string.h>

#include "ffpy_augmenter.h"
#include "ffpy_common.h"
#include "ffpy_dataset.h"
#include "ffpy_late_copy.h"
#include "ffpy_loader.h"
#include "ffpy_open.h"
#include "ffpy_remote.h"
#include "ffpy_tensor.h"
#include "fusionflow/fusionflow.h"

#define MSG_MAX FFPY_MSG_MAX

static PyObject *exception_factory; /* callable (status, message) -> exception instance */

/* Raises the library's error as a Python exception; returns NULL. */
PyObject *ffpy_raise_status(ff_status st, const char *msg) {
  if (!exception_factory) {
    PyErr_Format(PyExc_RuntimeError, "fusionflow: %s (%s)", msg, ff_status_str(st));
    return NULL;
  }
  PyObject *text = PyUnicode_DecodeFSDefault(msg); /* paths may not be UTF-8 */
  if (!text) return NULL;
  PyObject *exc = PyObject_CallFunction(exception_factory, "iO", (int)st, text);
  Py_DECREF(text);
  if (!exc) return NULL;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

/* The UTF-8 of a pipeline text as a new bytes object; NULL with ValueError
 * when it holds a NUL (C would read the text only up to it and ignore the rest). */
PyObject *ffpy_pipeline_text(PyObject *text) {
  PyObject *utf8 = PyUnicode_AsUTF8String(text);
  if (utf8 && strlen(PyBytes_AsString(utf8)) != (size_t)PyBytes_Size(utf8)) {
    Py_DECREF(utf8);
    PyErr_SetString(PyExc_ValueError, "fusionflow: the pipeline text contains a NUL character");
    return NULL;
  }
  return utf8;
}

/* "O&" converter: a Python int in [0, 2**64) into unsigned long long
 * (the "K" format would wrap 2**64 to 0, which means no limit). */
int ffpy_to_u64(PyObject *obj, void *out) {
  if (!PyLong_Check(obj)) {
    PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");
    if (name) PyErr_Format(PyExc_TypeError, "fusionflow: expected an int (got %S)", name);
    Py_XDECREF(name);
    return 0;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(obj);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "fusionflow: the value must be in [0, 2**64)");
    return 0;
  }
  *(unsigned long long *)out = v;
  return 1;
}

int ffpy_add_type(PyObject *module, PyType_Spec *spec, PyTypeObject **out) {
  PyObject *type = PyType_FromSpec(spec);
  if (!type) return -1;
  const char *dot = strrchr(spec->name, '.');
  if (PyModule_AddObject(module, dot ? dot + 1 : spec->name, type)) { /* takes the reference on success */
    Py_DECREF(type);
    return -1;
  }
  if (out) {
    Py_INCREF(type); /* *out's own, for as long as the process runs */
    *out = (PyTypeObject *)type;
  }
  return 0;
}

/* ---------------------------------------------------------------- module */

/* The arguments augment_image and image_plan share: (path, pipeline, seed=0, epoch=0, index=0,
 * semantics=0); format names the function. 1, with a->path and a->pipeline bytes to release
 * (image_args_release), or 0 with the exception set. */
typedef struct image_args {
  PyObject *path, *pipeline;
  unsigned long long seed, epoch, index;
  int semantics;
} image_args;

static int image_args_parse(PyObject *args, PyObject *kwargs, const char *format, image_args *a) {
  static char *kwlist[] = {"path", "pipeline", "seed", "epoch", "index", "semantics", NULL};
  PyObject *pipeline_obj;
  *a = (image_args){.semantics = FF_SEMANTICS_V1};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, PyUnicode_FSConverter, &a->path, &pipeline_obj,
                                   &a->seed, &a->epoch, &a->index, &a->semantics))
    return 0;
  a->pipeline = ffpy_pipeline_text(pipeline_obj);
  if (a->pipeline) return 1;
  Py_DECREF(a->path);
  return 0;
}

static void image_args_release(image_args *a) {
  Py_DECREF(a->path);
  Py_DECREF(a->pipeline);
}

static PyObject *mod_augment_image(PyObject *module, PyObject *args, PyObject *kwargs) {
  (void)module;
  image_args a;
  if (!image_args_parse(args, kwargs, "O&U|KKKi:augment_image", &a)) return NULL;
  uint8_t *pixels = NULL;
  int h = 0, w = 0;
  char err[MSG_MAX] = "";
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff_image_augment_as(PyBytes_AsString(a.path), PyBytes_AsString(a.pipeline), (ff_semantics)a.semantics, a.seed,
                           a.epoch, a.index, &pixels, &h, &w, err, sizeof err);
  Py_END_ALLOW_THREADS
  image_args_release(&a);
  if (st != FF_OK) return ffpy_raise_status(st, err);
  ffpy_owner *o = ffpy_owner_new(NULL, pixels, NULL);
  if (!o) {
    ff_free(pixels);
    return PyErr_NoMemory();
  }
  ff_tensor t = {pixels, FF_UINT8, FF_NHWC, 3, {h, w, 3, 0}, {(int64_t)w * 3, 3, 1, 0}};
  PyObject *r = ffpy_tensor_new(o, &t);
  ffpy_owner_decref(o);
  return r;
}

/* ff_image_plan_as: what augment_image draws for that sample, as JSON text (fusionflow.check replays it). */
static PyObject *mod_image_plan(PyObject *module, PyObject *args, PyObject *kwargs) {
  (void)module;
  image_args a;
  if (!image_args_parse(args, kwargs, "O&U|KKKi:image_plan", &a)) return NULL;
  char *json = NULL, err[MSG_MAX] = "";
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff_image_plan_as(PyBytes_AsString(a.path), PyBytes_AsString(a.pipeline), (ff_semantics)a.semantics, a.seed,
                        a.epoch, a.index, &json, err, sizeof err);
  Py_END_ALLOW_THREADS
  image_args_release(&a);
  if (st != FF_OK) return ffpy_raise_status(st, err);
  PyObject *r = PyUnicode_FromString(json);
  ff_free(json);
  return r;
}

static PyObject *mod_set_exception_factory(PyObject *module, PyObject *f) {
  (void)module;
  Py_INCREF(f);
  PyObject *old = exception_factory;
  exception_factory = f;
  Py_XDECREF(old);
  Py_RETURN_NONE;
}

static PyObject *mod_version(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  return PyUnicode_FromString(ff_version());
}

static PyObject *mod_cpu_isa(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  return PyUnicode_FromString(ff_cpu_isa());
}

static PyObject *mod_status_str(PyObject *module, PyObject *arg) {
  (void)module;
  long v = PyLong_AsLong(arg);
  if (v == -1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(ff_status_str((ff_status)v));
}

/* The recipe presets: a list of (name, source, pipeline, repeated_augmentations, needs, why), why
 * None when this build runs the recipe, else ff_recipe_check's message. */
static PyObject *mod_recipes(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  PyObject *list = PyList_New(0);
  for (size_t i = 0; list && ff_recipe_at(i); i++) {
    const ff_recipe *r = ff_recipe_at(i);
    char why[1024];
    int ok = ff_recipe_check(r, why, sizeof why) == FF_OK;
    PyObject *t = Py_BuildValue("(sssisz)", r->name, r->source, r->pipeline, r->repeated_augmentations, r->needs,
                                ok ? NULL : why);
    if (!t || PyList_Append(list, t)) Py_CLEAR(list);
    Py_XDECREF(t);
  }
  return list;
}

/* recipe_pipeline(name, num_classes) -> str: ff_recipe_pipeline's text (num_classes 0: as published);
 * ValueError for num_classes and a recipe without a batch stage, an unknown name, a num_classes outside
 * [0, FF_MAX_NUM_CLASSES]. */
static PyObject *mod_recipe_pipeline(PyObject *module, PyObject *args) {
  (void)module;
  const char *name;
  int num_classes;
  size_t len = 0;
  if (!PyArg_ParseTuple(args, "si", &name, &num_classes)) return NULL;
  const ff_recipe *r = ff_recipe_find(name);
  ff_status st = ff_recipe_pipeline(r, num_classes, NULL, 0, &len);
  if (st == FF_EPIPELINE)
    return PyErr_Format(PyExc_ValueError, "fusionflow: recipe '%s' has no batch stage: num_classes does not apply",
                        name);
  if (st)
    return PyErr_Format(PyExc_ValueError, "fusionflow: no recipe '%s', or num_classes %d outside [0, %d]", name,
                        num_classes, FF_MAX_NUM_CLASSES);
  char *text = PyMem_Malloc(len + 1);
  if (!text) return PyErr_NoMemory();
  ff_recipe_pipeline(r, num_classes, text, len + 1, NULL); /* FF_OK, as the first call */
  PyObject *out = PyUnicode_FromStringAndSize(text, (Py_ssize_t)len);
  PyMem_Free(text);
  return out;
}

/* _interpreter_exiting(): called at exit (atexit, before finalization): no
 * worker thread may take the GIL from now on (Python datasets). */
static PyObject *mod_interpreter_exiting(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  ffpy_dataset_exiting();
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"recipes", mod_recipes, METH_NOARGS,
     "recipes() -> [(name, source, pipeline, repeated_augmentations, needs, why_not_runnable or None)]"},
    {"recipe_pipeline", mod_recipe_pipeline, METH_VARARGS,
     "recipe_pipeline(name, num_classes) -> the recipe's pipeline text, its mixup_cutmix's num_classes set\n"
     "(0: as published)"},
    {"_interpreter_exiting", mod_interpreter_exiting, METH_NOARGS, NULL},
    {"open_loader", (PyCFunction)(void (*)(void))ffpy_open_loader, METH_VARARGS | METH_KEYWORDS,
     "open_loader(source, pipeline, batch_size=64, shuffle=1, drop_last=0, seed=0, num_threads=0, prefetch=2,\n"
     "            rank=-1, world_size=-1, on_error=0, max_image_pixels=89478485, device=\"cpu\",\n"
     "            device_memory_limit_bytes=0, strict_decode=False, allow_empty=False, sampler_drop_last=False,\n"
     "            torch_permutation=False, pin_memory=-1, output_device=\"cpu\", device_decode=0,\n"
     "            deterministic=False, output_dtype=0, memory_format=0, semantics=0,\n"
     "            repeated_augmentations=0, shuffle_buffer=1000, dataset=None, dataset_size=0,\n"
     "            open_progress=None, remote=None) -> CLoader\n"
     "            (output_dtype: ff_output_dtype, memory_format: ff_memory_format, semantics: ff_semantics;\n"
     "            open_progress: callable(dict of ff_open_progress) while a streamed source opens)"},
    {"augment_image", (PyCFunction)(void (*)(void))mod_augment_image, METH_VARARGS | METH_KEYWORDS,
     "augment_image(path, pipeline, seed=0, epoch=0, index=0, semantics=0) -> Tensor (H, W, 3) uint8"},
    {"image_plan", (PyCFunction)(void (*)(void))mod_image_plan, METH_VARARGS | METH_KEYWORDS,
     "image_plan(path, pipeline, seed=0, epoch=0, index=0, semantics=0) -> JSON text of ff_image_plan_as"},
    {"_set_exception_factory", mod_set_exception_factory, METH_O, NULL},
    {"version", mod_version, METH_NOARGS, "version() -> the linked library's 'MAJOR.MINOR.PATCH'"},
    {"cpu_isa", mod_cpu_isa, METH_NOARGS, "cpu_isa() -> 'avx512', 'avx2' or 'scalar': the CPU ops' vector paths"},
    {"status_str", mod_status_str, METH_O, "status_str(status) -> the library's name of a status"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "fusionflow._fusionflow", "C extension of fusionflow (see the fusionflow package).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fusionflow(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  if (ffpy_tensor_add(m) || ffpy_loader_add(m) || ffpy_augmenter_add(m) ||
      PyModule_AddFunctions(m, ffpy_late_copy_methods) || ffpy_remote_add(m))
    goto fail;
  static const struct {
    const char *name;
    int value;
  } statuses[] = {
      {"FF_OK", FF_OK},         {"FF_END", FF_END},       {"FF_EINVAL", FF_EINVAL},   {"FF_EPIPELINE", FF_EPIPELINE},
      {"FF_EDATA", FF_EDATA},   {"FF_ETOOBIG", FF_ETOOBIG}, {"FF_EEMPTY", FF_EEMPTY}, {"FF_EIO", FF_EIO},
      {"FF_ENOMEM", FF_ENOMEM}, {"FF_EDEVICE", FF_EDEVICE}, {"FF_EINTERNAL", FF_EINTERNAL},
  };
  for (size_t i = 0; i < sizeof statuses / sizeof *statuses; i++)
    if (PyModule_AddIntConstant(m, statuses[i].name, statuses[i].value)) goto fail;
  ff_config defaults;
  ff_config_init(&defaults);
  PyObject *max_pixels = PyLong_FromUnsignedLongLong(defaults.max_image_pixels);
  if (!max_pixels || PyModule_AddObject(m, "DEFAULT_MAX_IMAGE_PIXELS", max_pixels)) {
    Py_XDECREF(max_pixels);
    goto fail;
  }
  if (PyModule_AddStringConstant(m, "DLPACK_VERSION", "0.8")) goto fail;
  if (PyModule_AddIntConstant(m, "MAX_NUM_CLASSES", FF_MAX_NUM_CLASSES)) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
