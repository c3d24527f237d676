// SPDX-License-Identifier: GPL-2.0
/*
 * crashlab: crash the kernel on purpose, one named function per crash kind, so the crash
 * lab (tests/lab) gets real x86 oops reports whose guilty function is known in advance.
 *
 *   insmod crashlab.ko kind=<null-deref|bug-on|warn|warn-repeat|list-corruption|soft-lockup|hung-task|gpf>
 *
 * warn-repeat prints the same WARNING `repeats` times (a WARN_ON in a hot path).
 *
 * The functions are noinline so each is its own frame in RIP: and the call trace; values
 * come through volatile variables so the compiler cannot see the crash coming and drop it.
 */
#include <linux/bug.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/string.h>

static char *kind = "";
module_param(kind, charp, 0444);
MODULE_PARM_DESC(kind, "which crash to cause at load time");

static int repeats = 50;
module_param(repeats, int, 0444);
MODULE_PARM_DESC(repeats, "how many times warn-repeat warns");

static int *volatile crashlab_pointer;	/* NULL, but the compiler cannot know it */
static volatile unsigned long crashlab_value = 1;
static struct task_struct *crashlab_thread;

static noinline void crashlab_null_deref(void)
{
	*crashlab_pointer = 0x2a;
}

static noinline void crashlab_bug_on(void)
{
	BUG_ON(crashlab_value != 0);
}

static noinline void crashlab_warn(void)
{
	WARN(crashlab_value != 0, "crashlab: value %lu is not zero\n", crashlab_value);
}

static noinline void crashlab_warn_repeat(void)
{
	int i;

	for (i = 0; i < repeats; i++)
		WARN(crashlab_value != 0, "crashlab: warning %d of %d\n", i + 1, repeats);
}

static noinline void crashlab_list_corruption(void)
{
	static LIST_HEAD(head);
	static struct list_head entry, other;

	list_add(&entry, &head);
	entry.prev = &other;	/* a stray write: head.next->prev no longer points back */
	list_add(&other, &head);
}

static noinline void crashlab_gpf(void)
{
	*(int *volatile)(0xdead000000000000UL + crashlab_value) = 0x2a;
}

static noinline void crashlab_soft_lockup(void)
{
	preempt_disable();
	while (crashlab_value)
		cpu_relax();
	preempt_enable();
}

static noinline int crashlab_hung_task(void *unused)
{
	while (!kthread_should_stop()) {
		set_current_state(TASK_UNINTERRUPTIBLE);
		schedule();
	}
	return 0;
}

static noinline void crashlab_start_hung_task(void)
{
	crashlab_thread = kthread_run(crashlab_hung_task, NULL, "crashlab_hung");
}

static const struct {
	const char *kind;
	void (*crash)(void);
} crashlab_kinds[] = {
	{ "null-deref", crashlab_null_deref },
	{ "bug-on", crashlab_bug_on },
	{ "warn", crashlab_warn },
	{ "warn-repeat", crashlab_warn_repeat },
	{ "list-corruption", crashlab_list_corruption },
	{ "gpf", crashlab_gpf },
	{ "soft-lockup", crashlab_soft_lockup },
	{ "hung-task", crashlab_start_hung_task },
};

static int __init crashlab_init(void)
{
	size_t i;

	pr_info("crashlab: kind=%s\n", kind);
	for (i = 0; i < ARRAY_SIZE(crashlab_kinds); i++) {
		if (!strcmp(kind, crashlab_kinds[i].kind)) {
			crashlab_kinds[i].crash();
			return 0;
		}
	}
	return -EINVAL;
}

static void __exit crashlab_exit(void)
{
	if (crashlab_thread)
		kthread_stop(crashlab_thread);
}

module_init(crashlab_init);
module_exit(crashlab_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("crash lab: real kernel crashes of known kinds");
