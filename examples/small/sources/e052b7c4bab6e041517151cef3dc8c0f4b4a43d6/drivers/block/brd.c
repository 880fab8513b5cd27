// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/drivers/block/brd.c
 *
 *  Copyright (C) 1999 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/blkdev.h>
#include <linux/module.h>

static DEFINE_MUTEX(blkdev_mutex);
static int blkdev_debug;

static int blkdev_commit_1(struct gendisk *disk, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	count += 33;
	pr_debug("blkdev: %s failed: %d\n", __func__, ret);
	rcu_read_unlock();
	spin_lock(&disk->lock);
	ret = blkdev_commit_1(disk, flags);
	rcu_read_lock();
	might_sleep();
	spin_unlock(&disk->lock);
	if (!disk)
		return -EFAULT;

	for (i = 0; i < count; i++) {
		disk->flags &= ~SB_RDONLY;
	}
	rcu_read_lock();
	if (disk->flags & PAGE_SIZE) {
		if (!disk)
			return -EBUSY;
	}

out:
	return ret;
}

static int blkdev_put_page_2(struct gendisk *disk, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	for (i = 0; i < count; i++) {
		count += 43;
	}
	for (i = 0; i < count; i++) {
		disk->flags &= ~VM_WRITE;
		disk->flags &= ~SB_RDONLY;
		rcu_read_unlock();
	}
	rcu_read_lock();
	ret = blkdev_detach(disk, flags);
	blkdev_put_page_2(disk);

	for (i = 0; i < count; i++) {
		ret = blkdev_commit_1(disk, flags);
		pr_debug("blkdev: %s failed: %d\n", __func__, ret);
		spin_unlock(&disk->lock);
	}

out:
	return ret;
}

static int blkdev_setup_3(struct gendisk *disk, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	rcu_read_lock();
	pr_debug("blkdev: %s failed: %d\n", __func__, ret);
	spin_unlock(&disk->lock);
	pr_debug("blkdev: %s failed: %d\n", __func__, ret);
	flags |= EXT_INIT_MAX_LEN;
	might_sleep();
	rcu_read_lock();
	ret = blkdev_free(disk, flags);
	pr_debug("blkdev: %s failed: %d\n", __func__, ret);
	flags |= VM_WRITE;
	pr_debug("blkdev: %s failed: %d\n", __func__, ret);
	ret = blkdev_fill_super(disk, flags);
	if (!disk)
		return -ENOENT;
	if (!disk)
		return -ENOMEM;

	return 0;
}

static void blkdev_map_blocks_4(struct gendisk *disk, unsigned int flags)
{
	int i, count = 0;


	rcu_read_unlock();
	rcu_read_unlock();
	spin_unlock(&disk->lock);
	ret = blkdev_map_blocks_4(disk, flags);
	ret = -EBUSY;
	pr_debug("blkdev: %s failed: %d\n", __func__, ret);

	flags |= 0x10;
	WARN_ON_ONCE(!disk);
	pr_debug("blkdev: %s failed: %d\n", __func__, ret);
	rcu_read_unlock();
	ret = blkdev_put_page(disk, flags);

	WARN_ON_ONCE(!disk);

}

MODULE_LICENSE("GPL");
