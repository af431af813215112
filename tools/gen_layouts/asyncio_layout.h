/* The asyncio part of a generated layout (struct py_asyncio_layout): the
 * C Task and Future objects, the generator fields that lead from one awaiting
 * coroutine to the next, and where a thread keeps its running loop and tasks.
 * Included by gen_layout.c after the CPython headers.
 *
 * Modules/_asynciomodule.c and Objects/genobject.c define FutureObj, TaskObj,
 * futureiterobject, _RunningLoopHolder and PyAsyncGenASend privately, so they
 * are re-declared below member by member, per version, from each version's
 * source; offsetof() then lays them out with the headers' own types. The
 * integration tests (tests/integration/test_asyncio.py) check every one of
 * them against live objects on each interpreter. */

#include "structmember.h"    /* PyMemberDef, in Python.h only from 3.12 */
#if MINOR <= 12
#include "opcode.h"
#else
#include "pycore_tstate.h"
#endif

/* FutureObj_HEAD(fut) as each version declares it. */
struct mirror_future {
    PyObject_HEAD
    PyObject *fut_loop;
    PyObject *fut_callback0;
    PyObject *fut_context0;
    PyObject *fut_callbacks;
    PyObject *fut_exception;
#if MINOR >= 10
    PyObject *fut_exception_tb;
#endif
    PyObject *fut_result;
    PyObject *fut_source_tb;
#if MINOR >= 9
    PyObject *fut_cancel_msg;
#endif
#if MINOR >= 13
    PyObject *fut_cancelled_exc;
#endif
#if MINOR >= 14
    PyObject *fut_awaited_by;
#endif
    int fut_state;              /* fut_state, an enum */
#if MINOR >= 14
    char fut_is_task;
    char fut_awaited_by_is_set;
#endif
#if MINOR >= 13
    /* 3.13 made these bitfields so the Task's own share their word. */
    unsigned fut_log_tb: 1;
    unsigned fut_blocking: 1;
    unsigned task_must_cancel: 1;
    unsigned task_log_destroy_pending: 1;
    int task_num_cancels_requested;
#else
    int fut_log_tb;
    int fut_blocking;
    PyObject *dict;
    PyObject *fut_weakreflist;
#if MINOR == 9 || MINOR == 10
    _PyErr_StackItem fut_cancelled_exc_state;
#elif MINOR == 11 || MINOR == 12
    PyObject *fut_cancelled_exc;
#endif
#endif
};

struct mirror_task {
    struct mirror_future fut;
    PyObject *task_fut_waiter;
    PyObject *task_coro;
    PyObject *task_name;
    PyObject *task_context;
#if MINOR <= 12
    int task_must_cancel;
    int task_log_destroy_pending;
#endif
#if MINOR == 11 || MINOR == 12
    int task_num_cancels_requested;
#endif
#if MINOR >= 14
    struct llist_node task_node;
#endif
};

/* The done callback by which a task waiting on a future is woken, 3.8/3.9
 * (from 3.10 a builtin method whose m_self is the task). */
struct mirror_wakeup {
    PyObject_HEAD
    PyObject *ww_task;
};

/* What `await future` leaves in the awaiting coroutine. */
struct mirror_future_iter {
    PyObject_HEAD
    PyObject *future;
};

/* The value of the thread-state dict's running-loop entry, 3.8-3.11. */
struct mirror_running_loop_holder {
    PyObject_HEAD
    PyObject *rl_loop;
};

/* What `await agen.__anext__()` leaves: the async generator it drives. */
struct mirror_asend {
    PyObject_HEAD
    PyObject *ags_gen;
};

/* Where fut_log_tb lives and which bits are it: a plain int up to 3.12, a
 * bitfield from 3.13, found by setting it in a zeroed mirror. */
static void emit_log_tb(void)
{
    struct mirror_future m;
    memset(&m, 0, sizeof m);
    m.fut_log_tb = 1;
    const unsigned char *bytes = (const unsigned char *)&m;
    for (size_t i = 0; i < sizeof m; i++)
        if (bytes[i]) {
            emit("asyncio.fut_log_tb", (long)i);
            emit_int("asyncio.fut_log_tb_mask", bytes[i]);
            return;
        }
}

static void emit_asyncio(void)
{
    emit_log_tb();
    emit("asyncio.fut_exception", OFF(struct mirror_future, fut_exception));
    emit("asyncio.fut_loop", OFF(struct mirror_future, fut_loop));
    emit("asyncio.fut_callback0", OFF(struct mirror_future, fut_callback0));
    emit("asyncio.fut_callbacks", OFF(struct mirror_future, fut_callbacks));
    emit("asyncio.fut_state", OFF(struct mirror_future, fut_state));
#if MINOR >= 14
    emit("asyncio.fut_awaited_by", OFF(struct mirror_future, fut_awaited_by));
    emit("asyncio.fut_awaited_by_is_set", OFF(struct mirror_future, fut_awaited_by_is_set));
#else
    emit_none("asyncio.fut_awaited_by");
    emit_none("asyncio.fut_awaited_by_is_set");
#endif
    emit("asyncio.task_size", SIZE(struct mirror_task));
    emit("asyncio.task_fut_waiter", OFF(struct mirror_task, task_fut_waiter));
    emit("asyncio.task_coro", OFF(struct mirror_task, task_coro));
    emit("asyncio.task_name", OFF(struct mirror_task, task_name));
#if MINOR >= 14
    emit("asyncio.task_node", OFF(struct mirror_task, task_node));
#else
    emit_none("asyncio.task_node");
#endif
    emit("asyncio.future_iter_future", OFF(struct mirror_future_iter, future));
    emit("asyncio.asend_gen", OFF(struct mirror_asend, ags_gen));
    /* The registries: WeakSets of weak references, and plain sets. */
    emit("asyncio.set_mask", OFF(PySetObject, mask));
    emit("asyncio.set_table", OFF(PySetObject, table));
    emit("asyncio.set_entry_size", SIZE(setentry));
    emit("asyncio.set_entry_key", OFF(setentry, key));
    emit("asyncio.weakref_object", OFF(PyWeakReference, wr_object));
    /* __slots__ members (TimerHandle._when): the type's dict holds a
     * member descriptor whose PyMemberDef gives the offset. */
    emit("asyncio.type_dict", OFF(PyTypeObject, tp_dict));
    emit("asyncio.memberdescr_member", OFF(PyMemberDescrObject, d_member));
    emit("asyncio.memberdef_offset", OFF(PyMemberDef, offset));
    emit("asyncio.method_self", OFF(PyMethodObject, im_self));
    emit("asyncio.cfunction_self", OFF(PyCFunctionObject, m_self));
    /* Who awaits a task, from its done callbacks: a waiter's wake-up, or
     * gather's _done_callback, whose closure holds the gathering future. */
    emit("asyncio.func_closure", OFF(PyFunctionObject, func_closure));
#if MINOR <= 9
    emit("asyncio.wakeup_task", OFF(struct mirror_wakeup, ww_task));
#else
    emit_none("asyncio.wakeup_task");
#endif

    /* Where a thread keeps its running loop (and from 3.14 its tasks). */
#if MINOR <= 12
    emit("asyncio.tstate_dict", OFF(PyThreadState, dict));
    emit("asyncio.holder_loop", MINOR <= 11 ? OFF(struct mirror_running_loop_holder, rl_loop)
                                            : -1L);
    emit_none("asyncio.tstate_running_loop");
#else
    emit_none("asyncio.tstate_dict");
    emit_none("asyncio.holder_loop");
    emit("asyncio.tstate_running_loop", OFF(_PyThreadStateImpl, asyncio_running_loop));
#endif
#if MINOR >= 14
    emit("asyncio.tstate_running_task", OFF(_PyThreadStateImpl, asyncio_running_task));
    emit("asyncio.tstate_tasks_head", OFF(_PyThreadStateImpl, asyncio_tasks_head));
    emit("asyncio.interp_tasks_head", OFF(PyInterpreterState, asyncio_tasks_head));
#else
    emit_none("asyncio.tstate_running_task");
    emit_none("asyncio.tstate_tasks_head");
    emit_none("asyncio.interp_tasks_head");
#endif

    /* From one suspended coroutine to what it awaits. */
    emit("asyncio.gen_qualname", OFF(PyGenObject, gi_qualname));
#if MINOR <= 10
    emit_none("asyncio.gen_frame_state");
#if MINOR <= 9
    emit("asyncio.frame_stacktop", OFF(PyFrameObject, f_stacktop));
    emit_none("asyncio.frame_valuestack");
    emit_none("asyncio.frame_stackdepth");
#else
    emit_none("asyncio.frame_stacktop");
    emit("asyncio.frame_valuestack", OFF(PyFrameObject, f_valuestack));
    emit("asyncio.frame_stackdepth", OFF(PyFrameObject, f_stackdepth));
#endif
    emit_int("asyncio.op_yield_from", YIELD_FROM);
#else
    emit("asyncio.gen_frame_state", OFF(PyGenObject, gi_frame_state));
    emit_none("asyncio.frame_stacktop");
    emit_none("asyncio.frame_valuestack");
    emit_none("asyncio.frame_stackdepth");
    emit_int("asyncio.op_yield_from", -1);
#endif
#if MINOR == 11 || MINOR == 12
    /* No state of its own: the RESUME after the yield says (oparg >= 2). */
    emit_int("asyncio.op_resume", RESUME);
#if MINOR == 11
    emit_int("asyncio.op_resume_alt", RESUME_QUICK);
#else
    emit_int("asyncio.op_resume_alt", INSTRUMENTED_RESUME);
#endif
#else
    emit_int("asyncio.op_resume", -1);
    emit_int("asyncio.op_resume_alt", -1);
#endif
#if MINOR >= 11
    emit_int("asyncio.state_created", FRAME_CREATED);
    emit_int("asyncio.state_cleared", FRAME_CLEARED);
#else
    emit_int("asyncio.state_created", -100);
    emit_int("asyncio.state_cleared", -100);
#endif
#if MINOR >= 13
    emit_int("asyncio.state_yield_from", FRAME_SUSPENDED_YIELD_FROM);
#else
    emit_int("asyncio.state_yield_from", -100);
#endif
    /* Which value-stack slot below the stack pointer holds the awaited
     * object: the top one, except on 3.15, whose SEND keeps a NULL above it
     * (checked live; Modules/_remote_debugging reads the same slot). */
    emit_int("asyncio.yield_from_slot", MINOR >= 15 ? 2 : 1);
}
