/**
 * preserve_ordering: responses leave in the order their requests were dispatched to
 * instances (Triton's rule), whatever order the batches finish in.
 */
export class OrderedDelivery {
  private nextTicket = 0;
  private nextToSettle = 0;
  private readonly ready = new Map<number, () => void>();

  /** A place in line, taken when a request is dispatched. */
  ticket(): number {
    return this.nextTicket++;
  }

  /** Runs `settle` once every earlier ticket has settled. */
  settle(ticket: number, settle: () => void): void {
    this.ready.set(ticket, settle);
    for (let next = this.ready.get(this.nextToSettle); next; next = this.ready.get(this.nextToSettle)) {
      this.ready.delete(this.nextToSettle);
      this.nextToSettle++;
      next();
    }
  }
}
