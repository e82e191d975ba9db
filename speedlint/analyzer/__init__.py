"""analyzer"""
