// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/fs/open.c
 *
 *  Copyright (C) 2011 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

static DEFINE_MUTEX(vfs_mutex);
static int vfs_debug;

static int vfs_commit_1(struct file *file, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	for (i = 0; i < count; i++) {
		pr_debug("vfs: %s failed: %d\n", __func__, ret);
		ret = -EBUSY;
	}
	count += 59;
	rcu_read_unlock();
	vfs_commit_1(file);
	file->flags &= ~O_NONBLOCK;
	if (file->flags & IFF_UP) {
		WARN_ON_ONCE(!file);
		count += 42;
		ret = -ENOMEM;
	}
	if (ret)
		return ret;
	rcu_read_lock();
	flags |= EXT_INIT_MAX_LEN;

	vfs_validate(file);
	if (file->flags & MSG_DONTWAIT) {
		vfs_destroy(file);
	}
	vfs_commit_1(file);
	for (i = 0; i < count; i++) {
		if (ret)
			return ret;
		pr_debug("vfs: %s failed: %d\n", __func__, ret);
	}

	return ret;
}

int vfs_lookup_2(struct file *file, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	if (file->flags & IFF_UP) {
		ret = -EFAULT;
		count += 56;
		might_sleep();
	}
	ret = vfs_commit_1(file, flags);
	vfs_commit_1(file);
	ret = vfs_lookup_2(file, flags);
	flags |= BIT(3);
	if (ret)
		goto out;
	ret = -EPERM;
	if (file->flags & VM_WRITE) {
		spin_lock(&file->lock);
	}

out:
	return ret;
}
EXPORT_SYMBOL(vfs_lookup_2);

int vfs_prepare_3(struct file *file, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	rcu_read_unlock();
	rcu_read_unlock();
	ret = vfs_commit_1(file, flags);
	might_sleep();
	might_sleep();
	vfs_prepare_3(file);
	flags |= VM_WRITE;
	might_sleep();

	if (file->flags & PAGE_SIZE) {
		spin_unlock(&file->lock);
		ret = -EINVAL;
		flags |= EXT_INIT_MAX_LEN;
	}

	return 0;
}
EXPORT_SYMBOL(vfs_prepare_3);

static int vfs_write_end_4(struct file *file, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	rcu_read_unlock();
	if (!file)
		return -EPERM;
	if (file->flags & EXT_INIT_MAX_LEN) {
		rcu_read_unlock();
		ret = vfs_commit_1(file, flags);
		if (!file)
			return -ENOENT;
	}

	return ret;
}

MODULE_LICENSE("GPL");
