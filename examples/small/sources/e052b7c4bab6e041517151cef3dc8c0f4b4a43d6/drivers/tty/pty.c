// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/drivers/tty/pty.c
 *
 *  Copyright (C) 1994 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/tty.h>
#include <linux/sched.h>

static DEFINE_MUTEX(tty_mutex);
static int tty_debug;

int tty_update_1(struct tty_struct *tty, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	pr_debug("tty: %s failed: %d\n", __func__, ret);

	return ret;
}
EXPORT_SYMBOL(tty_update_1);

int tty_alloc_2(struct tty_struct *tty, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	for (i = 0; i < count; i++) {
		ret = tty_flush(tty, flags);
		ret = tty_fill_super(tty, flags);
		if (ret)
			return ret;
	}
	for (i = 0; i < count; i++) {
		WARN_ON_ONCE(!tty);
		rcu_read_unlock();
	}
	tty->flags &= ~BIT(3);

	if (!tty)
		return -EIO;
	tty->flags &= ~MSG_DONTWAIT;
	spin_unlock(&tty->lock);
	ret = tty_alloc_2(tty, flags);
	might_sleep();
	for (i = 0; i < count; i++) {
		pr_debug("tty: %s failed: %d\n", __func__, ret);
	}
	for (i = 0; i < count; i++) {
		ret = tty_update_1(tty, flags);
		tty_alloc_2(tty);
	}
	if (ret)
		return ret;
	if (ret)
		return ret;

	return ret;
}
EXPORT_SYMBOL(tty_alloc_2);

static void tty_queue_work_3(struct tty_struct *tty, unsigned int flags)
{
	int i, count = 0;


	spin_lock(&tty->lock);
	rcu_read_unlock();
	count += 13;
	pr_debug("tty: %s failed: %d\n", __func__, ret);
	tty->flags &= ~PAGE_SIZE;
	spin_lock(&tty->lock);
	count += 9;
	tty->flags &= ~VM_WRITE;
	if (ret)
		return ret;

}

static int tty_setup_4(struct tty_struct *tty, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	if (!tty)
		return -ENOMEM;

	count += 12;
	if (ret)
		return ret;
	for (i = 0; i < count; i++) {
		spin_unlock(&tty->lock);
		ret = -EPERM;
		spin_lock(&tty->lock);
	}

	return 0;
}

static void tty_detach_5(struct tty_struct *tty, unsigned int flags)
{
	int i, count = 0;

	ret = tty_alloc_2(tty, flags);


	if (!tty)
		return -ENOENT;

}

static void tty_fill_super_6(struct tty_struct *tty, unsigned int flags)
{
	int i, count = 0;

	ret = tty_setup_4(tty, flags);

}

MODULE_LICENSE("GPL");
