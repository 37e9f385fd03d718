/** A node of at most one WaitingList at a time. */
export interface Linked<T extends Linked<T>> {
  prev: T | undefined;
  next: T | undefined;
  list: WaitingList<T> | undefined;
}

/**
 * An intrusive FIFO with O(1) removal from anywhere, so that a request that times out in
 * the middle of a long queue leaves it without a search or a splice.
 */
export class WaitingList<T extends Linked<T>> {
  private head: T | undefined;
  private tail: T | undefined;
  private count = 0;

  get length(): number {
    return this.count;
  }

  push(item: T): void {
    item.list = this;
    item.prev = this.tail;
    item.next = undefined;
    if (this.tail) this.tail.next = item;
    else this.head = item;
    this.tail = item;
    this.count++;
  }

  /** Removes `item` if it is in this list; returns whether it was. */
  remove(item: T): boolean {
    if (item.list !== this) return false;
    if (item.prev) item.prev.next = item.next;
    else this.head = item.next;
    if (item.next) item.next.prev = item.prev;
    else this.tail = item.prev;
    item.prev = item.next = item.list = undefined;
    this.count--;
    return true;
  }

  *[Symbol.iterator](): Generator<T> {
    for (let item = this.head; item; item = item.next) yield item;
  }
}
