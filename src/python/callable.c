/* The C callable a Python frame is calling: when the frame's current
 * instruction is a call, the callable lies on its value stack (where exactly,
 * per call kind, is in the generated layout). Named as Python shows it
 * (re.Pattern.match, time.sleep, dict) or, for a ctypes function pointer, by
 * the ELF symbol of the code it points at. Costs no native unwinding. */
#include "python/callable.h"

#include <stdio.h>
#include <string.h>

#include "native/symbol_find.h"
#include "python/primitives.h"

/* CDataObject.b_ptr follows PyObject_HEAD in every version (Modules/_ctypes/
 * ctypes.h, not installed; checked live on 3.8-3.15); for a function pointer
 * it points at the function's address. */
#define CDATA_B_PTR 16
#define PAGE 4096u

static int read_c_string(struct py_reader *r, uint64_t addr, char *out, size_t size)
{
    size_t n = 0;
    while (addr && n + 1 < size) {
        size_t chunk = PAGE - (size_t)(addr % PAGE);
        if (chunk > size - 1 - n)
            chunk = size - 1 - n;
        if (target_read(r->t, addr, out + n, chunk) != 0)
            return -1;
        void *nul = memchr(out + n, '\0', chunk);
        if (nul)
            return 0;
        n += chunk;
        addr += chunk;
    }
    out[n] = '\0';
    return n ? 0 : -1;
}

static int method_def_name(struct py_reader *r, uint64_t def, char *out, size_t size)
{
    uint64_t name;
    if (!def || target_read_u64(r->t, def + (uint64_t)r->L->methoddef_name, &name) != 0)
        return -1;
    return read_c_string(r, name, out, size);
}

static int builtin_name(struct py_reader *r, uint64_t obj, char *out, size_t size)
{
    const struct py_layout *L = r->L;
    uint64_t def, self = 0, module = 0;
    char name[96], prefix[96] = "";
    if (target_read_u64(r->t, obj + (uint64_t)L->cfunction_ml, &def) != 0 ||
        method_def_name(r, def, name, sizeof name) != 0 ||
        target_read_u64(r->t, obj + (uint64_t)L->cfunction_self, &self) != 0)
        return -1;
    const char *self_type = NULL;
    if (self && py_type_of(r, self, NULL, &self_type) != 0)
        return -1;
    if (self && strcmp(self_type, "module") != 0) {
        snprintf(prefix, sizeof prefix, "%s.", self_type);
    } else if (target_read_u64(r->t, obj + (uint64_t)L->cfunction_module, &module) == 0 && module &&
               py_str(r, module, prefix, sizeof prefix - 1) == 0) {
        if (strcmp(prefix, "builtins") == 0)
            prefix[0] = '\0';
        else
            strcat(prefix, ".");
    }
    snprintf(out, size, "%s%s", prefix, name);
    return 0;
}

static int descriptor_name(struct py_reader *r, uint64_t obj, char *out, size_t size)
{
    uint64_t type, def;
    const char *type_name;
    char name[96];
    if (target_read_u64(r->t, obj + (uint64_t)r->L->descr_type, &type) != 0 ||
        py_type_name(r, type, &type_name) != 0 ||
        target_read_u64(r->t, obj + (uint64_t)r->L->descr_method, &def) != 0 ||
        method_def_name(r, def, name, sizeof name) != 0)
        return -1;
    snprintf(out, size, "%s.%s", type_name, name);
    return 0;
}

static int ctypes_name(struct py_reader *r, uint64_t obj, char *out, size_t size)
{
    uint64_t b_ptr, fn;
    if (target_read_u64(r->t, obj + CDATA_B_PTR, &b_ptr) != 0 || !b_ptr ||
        target_read_u64(r->t, b_ptr, &fn) != 0 || !fn)
        return -1;
    char name[128];
    const char *module = NULL;
    /* No symbol covers it (stripped, or a library mapped after the maps
     * were read): said plainly, with the address. */
    if (native_function_at(r->t, fn, name, sizeof name, &module) != 0) {
        snprintf(out, size, "unnamed ctypes function at 0x%llx", (unsigned long long)fn);
        return 1;
    }
    snprintf(out, size, "%s (%s)", name, module ? module : "?");
    return 0;
}

/* What kind of C callable obj is: 'b' builtin, 'd' method descriptor,
 * 't' C type, 'c' ctypes function pointer; 0 for anything else. */
static char c_callable_class(struct py_reader *r, uint64_t obj)
{
    uint64_t type, flags;
    const char *type_name;
    if (!obj || py_type_of(r, obj, &type, &type_name) != 0)
        return 0;
    if (strcmp(type_name, "builtin_function_or_method") == 0 || strcmp(type_name, "builtin_method") == 0)
        return 'b';
    if (strcmp(type_name, "method_descriptor") == 0 || strcmp(type_name, "classmethod_descriptor") == 0)
        return 'd';
    if (strcmp(type_name, "type") == 0)
        return target_read_u64(r->t, obj + (uint64_t)r->L->type_flags, &flags) == 0 &&
                       !(flags & (uint64_t)r->L->tpflags_heaptype)
                   ? 't'
                   : 0;
    /* PyCFuncPtr_Type's tp_name: "_ctypes.PyCFuncPtr" up to 3.10. */
    if (py_type_is_or_inherits(r, obj, "_ctypes.CFuncPtr") ||
        py_type_is_or_inherits(r, obj, "_ctypes.PyCFuncPtr"))
        return 'c';
    return 0;
}

int py_c_callable_name(struct py_reader *r, uint64_t obj, char *out, size_t size)
{
    const char *name;
    switch (c_callable_class(r, obj)) {
    case 'b': return builtin_name(r, obj, out, size);
    case 'd': return descriptor_name(r, obj, out, size);
    case 'c': return ctypes_name(r, obj, out, size);
    case 't':
        if (py_type_name(r, obj, &name) != 0)
            return -1;
        snprintf(out, size, "%s", name);
        return 0;
    default: return -1;
    }
}

bool py_c_callable_lasting(struct py_reader *r, uint64_t obj)
{
    char kind = c_callable_class(r, obj);
    if (kind != 'b')
        return kind != 0;
    uint64_t self;
    const char *self_type = NULL;
    return target_read_u64(r->t, obj + (uint64_t)r->L->cfunction_self, &self) == 0 &&
           (!self || (py_type_of(r, self, NULL, &self_type) == 0 && strcmp(self_type, "module") == 0));
}

char py_frame_call_kind(struct py_reader *r, const struct py_frame *f, int *oparg)
{
    const struct py_layout *L = r->L;
    uint64_t at;
    if (!L->call_kinds || !f->code_addr || f->instr_offset < 0 || f->instr_offset > (1L << 24))
        return 0;
    if (L->code_code != PY_OFF_NONE) {
        uint64_t bytes;
        if (target_read_u64(r->t, f->code_addr + (uint64_t)L->code_code, &bytes) != 0 || !bytes)
            return 0;
        at = bytes + (uint64_t)L->bytes_sval;
    } else if (L->code_code_adaptive != PY_OFF_NONE) {
        at = f->code_addr + (uint64_t)L->code_code_adaptive;
    } else {
        return 0;
    }
    unsigned char unit[2];
    if (target_read(r->t, at + (uint64_t)f->instr_offset, unit, 2) != 0)
        return 0;
    *oparg = unit[1];
    return L->call_kinds[unit[0]] == '0' ? 0 : L->call_kinds[unit[0]];
}

/* Where the callable of a call of this kind lies for a stack of depth top;
 * -1 when it cannot. 'M' puts it one lower when that slot is not NULL. */
static int callable_slot(char kind, int oparg, int top, const uint64_t *stack)
{
    int at;
    switch (kind) {
    case 'F': at = top - 1 - oparg; break;
    case 'K': at = top - 2 - oparg; break;
    case 'C': at = top - 2 - oparg; break;
    case 'W': at = top - 3 - oparg; break;
    case 'x': at = top - 2 - (oparg & 1); break;
    case 'y': at = top - 3 - (oparg & 1); break;
    case 'z': at = top - 4; break;
    case 'M':
        at = top - 2 - oparg;
        if (at >= 0 && !stack[at])
            at++;
        break;
    default: return -1;
    }
    return at >= 0 && at < top ? at : -1;
}

uint64_t py_frame_c_callable_find(struct py_reader *r, struct py_vars_cache *cache,
                                  const struct py_frame *f, char kind, int oparg,
                                  uint64_t *slot_addr)
{
    static _Thread_local struct py_frame_vars vars;
    if (!kind || py_frame_vars_read(cache, r, f->frame_addr, f->code_addr, &vars) != 0)
        return 0;
    const uint64_t *stack = vars.values + vars.n_named;
    uint64_t stack_addr = f->frame_addr +
                          (uint64_t)(r->L->frames == PY_FRAMES_OBJECTS ? r->L->frame_localsplus
                                                                       : r->L->iframe_localsplus) +
                          (uint64_t)vars.n_named * 8;
    if (vars.stack_exact) {
        int at = callable_slot(kind, oparg, vars.n_stack, stack);
        if (at < 0 || !c_callable_class(r, stack[at]))
            return 0;
        if (slot_addr)
            *slot_addr = stack_addr + (uint64_t)at * 8;
        return stack[at];
    }
    /* The live depth is unknown (3.8-3.13 keep it in a register during a
     * call): every depth the call fits in gives a slot, and slots above the
     * live depth hold stale pointers. Only one C callable among them names
     * the call; two (a nested call, or a stale one) name nothing. */
    uint64_t found = 0;
    int found_at = -1;
    for (int top = 1; top <= vars.n_stack; top++) {
        int at = callable_slot(kind, oparg, top, stack);
        if (at < 0 || at == found_at || stack[at] == found || !c_callable_class(r, stack[at]))
            continue;
        if (found)
            return 0;
        found = stack[at];
        found_at = at;
    }
    if (found && slot_addr)
        *slot_addr = stack_addr + (uint64_t)found_at * 8;
    return found;
}

int py_frame_c_callable(struct py_reader *r, struct py_vars_cache *cache, const struct py_frame *f,
                        char *out, size_t size)
{
    int oparg = 0;
    char kind = py_frame_call_kind(r, f, &oparg);
    uint64_t obj = kind ? py_frame_c_callable_find(r, cache, f, kind, oparg, NULL) : 0;
    return obj && py_c_callable_name(r, obj, out, size) >= 0 ? 0 : -1;
}
