// The last part of a text that grows without bound (a running cell's output), kept within a size:
// what a progress message or `status --output` shows of a cell still running.

/** The last `max` characters pushed (trimmed lazily, at twice that), and how many bytes were dropped before them. */
export class Tail {
  text = "";
  dropped = 0;
  constructor(private readonly max: number) {}
  push(s: string): void {
    this.text += s;
    if (this.text.length > this.max * 2) this.trim();
  }
  trim(): void {
    if (this.text.length <= this.max) return;
    const cut = this.text.length - this.max;
    this.dropped += Buffer.byteLength(this.text.slice(0, cut));
    this.text = this.text.slice(cut);
  }
}
